"""Shared test helpers: the anyio backend, a booted-context factory, a PostgreSQL server, the fixture data in
``tests/fixtures``, and the markers that let a run leave out what this machine cannot do.

Kept generic on purpose: every test package (harness, tool_todo, persistence, ...) builds on these. What a user's
tests would need too (the standard runtime in memory, the scripted model, a throwaway cluster) is
:mod:`dsh_todo.testing`; what stays here are the knobs only the harness's own tests turn.

Markers (registered in ``pyproject.toml``): ``browser``, ``postgres`` and ``dsh`` are put on a test by what it uses
(the ``browser`` fixture, the ``pg_url`` fixture, the ``dsh`` command of ``tests/dsh``), so a new test cannot forget
them; ``slow`` is written on the test.
A test that asks for the database only at run time (``request.getfixturevalue``) marks its parameter itself.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness import Context, boot
from dsh_todo.testing import ClusterUnavailable, memory_composition, start_cluster
from tests import needs

with contextlib.suppress(ImportError):
    # The MCP SDK's stdio client binds ``errlog=sys.stderr`` when it is first imported. Import it now, under
    # pytest's file-descriptor capture, so a test that first imports it under ``capsys`` (whose stream has no
    # ``fileno``; an in-process ``dsh-todo mcp`` does) does not leave every later stdio client broken.
    import mcp.client.stdio  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"
"""DSH's fixture logs and the reference's conformance vectors, copied into the repository (see its README)."""

TOOLS = "@deepseek-ai/dsh-tools"
SESSION = "@deepseek-ai/dsh-session"
PROJECTIONS = "@deepseek-ai/dsh-session-projection"
INVARIANTS = "@deepseek-ai/dsh-invariants"
SESSION_INVARIANT = "@deepseek-ai/dsh-session/invariant"
TOOL_TODO = "@deepseek-ai/dsh-tool-todo"
TODO_INVARIANT = "@deepseek-ai/dsh-tool-todo/invariant"

Row = dict[str, Any]


def fixtures_dir() -> Path:
    """The fixture data directory (``tests/fixtures``): DSH session logs and conformance vectors."""
    return FIXTURES_DIR


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """One JSON object per non-blank line."""
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def composition(*, allow_parallel: bool | None = True, tool: bool = True, projections: bool = True,
                invariants: Mapping[str, Any] | None = None, session_invariant: bool = False,
                todo_invariant: bool = False) -> list[Row]:
    """Rows for :func:`dsh_todo.harness.boot`, in dependency order.

    With no knob turned it is :func:`dsh_todo.testing.memory_composition`, what users boot. The knobs are for the
    harness's own tests: ``allow_parallel=None`` mounts the tool with no config at all, ``tool``/``projections``
    leave plugins out, and ``invariants`` (a config mapping) mounts the invariant registry, which the two companions
    need.
    """
    if tool and projections and invariants is None and allow_parallel is not None:
        return memory_composition(allow_parallel=allow_parallel)
    rows: list[Row] = [{"id": "tools", "name": TOOLS}, {"id": "session", "name": SESSION}]
    if projections:
        rows.append({"id": "session-projection", "name": PROJECTIONS})
    if invariants is not None:
        rows.append({"id": "invariants", "name": INVARIANTS, "config": dict(invariants)})
        if session_invariant:
            rows.append({"id": "session-invariant", "name": SESSION_INVARIANT})
    if tool:
        row: Row = {"id": "tool-todo", "name": TOOL_TODO}
        if allow_parallel is not None:
            row["config"] = {"allowParallelInProgress": allow_parallel}
        rows.append(row)
    if invariants is not None and todo_invariant:
        rows.append({"id": "tool-todo-invariant", "name": TODO_INVARIANT})
    return rows


BootFactory = Callable[..., Context]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def make_ctx() -> Iterator[BootFactory]:
    """``make_ctx(rows=None, **composition_kwargs)`` boots a context; every context is disposed after the test."""
    booted: list[Context] = []

    def factory(rows: Sequence[Mapping[str, Any]] | str | Path | None = None, **kwargs: Any) -> Context:
        ctx = boot(rows if rows is not None else composition(**kwargs))
        booted.append(ctx)
        return ctx

    yield factory
    for ctx in reversed(booted):
        ctx.dispose()


# -- PostgreSQL ---------------------------------------------------------------------------------------------------

TEST_DATABASE_ENV = "DSH_TODO_TEST_DATABASE_URL"


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A PostgreSQL server for the whole run: the one ``$DSH_TODO_TEST_DATABASE_URL`` names, else a throwaway cluster
    (:func:`dsh_todo.testing.start_cluster`, no fsync) started by the first test that needs it and deleted at the
    end. Without the server binaries (Debian's ``postgresql`` package) those tests skip, saying so."""
    url = os.environ.get(TEST_DATABASE_ENV)
    if url:
        yield url
        return
    try:
        cluster = start_cluster(durable=False)
    except ClusterUnavailable as exc:
        needs.unavailable(f"{exc}, and ${TEST_DATABASE_ENV} is not set")
    with cluster:
        yield cluster.url


@pytest.fixture
def pg_schema(pg_url: str) -> Iterator[str]:
    """A fresh schema name for one test (its tables appear on first use); dropped afterwards, so tests sharing the
    server never see each other's sessions."""
    import psycopg

    schema = f"t_{secrets.token_hex(6)}"
    yield schema
    with contextlib.suppress(psycopg.Error), psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# -- markers ------------------------------------------------------------------------------------------------------

_MARK_BY_FIXTURE = {"browser": "browser", "pg_url": "postgres", "dsh": "dsh"}


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by ``-m``
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for fixture, mark in _MARK_BY_FIXTURE.items():
            if fixture in used:
                item.add_marker(mark)


# -- helpers ------------------------------------------------------------------------------------------------------


def events_of(session: Any, event_type: str) -> list[Any]:
    """The ``data`` of every event of one type in a session's log, in order."""
    return [event["data"] for event in session.events if event["type"] == event_type]


def todo_writes(session: Any) -> list[Any]:
    """The ``todos`` list of every ``todo/write`` in a session's log, in order."""
    return [data["todos"] for data in events_of(session, "todo/write")]


def plan_json(path: str | Path) -> Any:
    """What ``dsh-todo plan PATH --json`` prints for a persisted log, parsed: the standing plan a person is shown."""
    from dsh_todo.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["plan", str(path), "--json"]) == 0
    return json.loads(out.getvalue())


def hanging_tool(ctx: Context, name: str = "slow") -> Any:
    """Register a tool whose calls never return, for cancellation tests; the returned ``anyio.Event`` is set once a
    call is running inside it (create it inside the test's event loop)."""
    import anyio

    from dsh_todo.harness.tools import define_tool

    started = anyio.Event()

    async def forever(_args: Any, _call: Any) -> None:
        started.set()
        await anyio.sleep_forever()

    ctx.tools.register(define_tool(name=name, description="never returns", parameters={}, execute=forever,
                                   render=lambda _args, _value: "done"))
    return started


class DiskSyncs:
    """Every ``os.fsync`` and ``os.replace`` while installed (:func:`disk_syncs`), with the thread that made it.

    How the durability tests count what an acknowledged write costs the caller (never a timing): persistence
    calls both through the ``os`` module, so wrapping the module's functions sees them all.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def record(self, kind: str) -> None:
        with self._lock:
            self.calls.append((kind, threading.get_ident()))

    def here(self, kind: str) -> int:
        """How many ``kind`` (``"fsync"``, ``"replace"``) calls the current thread made since :meth:`reset`."""
        me = threading.get_ident()
        with self._lock:
            return sum(1 for made, thread in self.calls if made == kind and thread == me)

    def elsewhere(self, kind: str) -> int:
        me = threading.get_ident()
        with self._lock:
            return sum(1 for made, thread in self.calls if made == kind and thread != me)

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()


@pytest.fixture
def disk_syncs(monkeypatch: pytest.MonkeyPatch) -> DiskSyncs:
    syncs = DiskSyncs()
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        syncs.record("fsync")
        real_fsync(fd)

    def replace(src: Any, dst: Any, **kwargs: Any) -> None:
        syncs.record("replace")
        real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return syncs


@pytest.fixture(autouse=True)
def _sigpipe_restored() -> Iterator[None]:
    """An in-process ``plan`` or ``events`` restores SIGPIPE's default for the whole process, as the real filter
    command must; put the handler back after each test, or a later test whose server writes to a socket a browser
    has closed kills the test run itself (exit 141)."""
    import signal

    before = signal.getsignal(signal.SIGPIPE)
    yield
    signal.signal(signal.SIGPIPE, before)
