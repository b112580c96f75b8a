"""Every chosen agent's sessions, read from its home (or the one named instead), and one session found by id.

Only through :func:`dsh_todo.coding_agents.base.reader`, so an agent's module is imported only when it is chosen.
A file that does not read is not dropped: it becomes a session with no plan whose ``extra["error"]`` is the
reader's line (naming the agent and the file), so a new release that changes its format shows as such.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from dsh_todo.coding_agents.base import AgentSession, Reader, reader


def home_of(agent: str, homes: Mapping[str, Path] | None = None) -> Path:
    """The home read for ``agent``: the one named in ``homes``, else the agent's own default."""
    named = (homes or {}).get(agent)
    return named if named is not None else reader(agent).default_home()


def read_file(found: Reader, path: Path) -> list[AgentSession]:
    """The sessions of one file; one that does not read becomes a session carrying the error (see the module)."""
    try:
        return found.read(path)
    except FileNotFoundError:
        return []  # gone between the listing and the read
    except (ValueError, OSError) as exc:
        try:
            updated = path.stat().st_mtime
        except OSError:
            updated = 0.0
        return [AgentSession(found.agent, path.stem, path, None, updated, None, extra={"error": str(exc)})]


def discover(agents: Iterable[str], homes: Mapping[str, Path] | None = None) -> list[AgentSession]:
    """The sessions of every agent in ``agents``, each from its home (see :func:`home_of`), most recent first."""
    sessions: list[AgentSession] = []
    for agent in agents:
        found = reader(agent)
        for path in found.session_paths(home_of(agent, homes)):
            sessions += read_file(found, path)
    sessions.sort(key=lambda session: session.updated, reverse=True)
    return sessions


def find(agents: Iterable[str], homes: Mapping[str, Path] | None, session_id: str) -> AgentSession | None:
    """The session named ``session_id`` (its id, or the path of its file) among ``agents``' homes, ``None`` when
    none holds it. Files whose names hold the id are read first; the rest only when none of them has it."""
    chosen = list(agents)
    candidate = Path(session_id)
    for agent in chosen:
        found = reader(agent)
        paths = found.session_paths(home_of(agent, homes))
        if candidate.is_file():
            target = candidate.resolve()
            named = [path for path in paths if path.resolve() == target]
            for path in named:
                sessions = read_file(found, path)
                if sessions:
                    return sessions[0]
            continue
        likely = [path for path in paths if session_id in path.name]
        for group in (likely, [path for path in paths if session_id not in path.name]):
            for path in group:
                for session in read_file(found, path):
                    if session.id == session_id:
                        return session
    return None
