"""Storage knows no event type but what recovery and the log format need (decision 0043).

What an event means to a fold is its owner's (the plan rule is the todo tool's, ``tool_todo/rules.py``); a reader
tells the pass which types it reads (:class:`~dsh_todo.harness.persistence.interest.Interest`). Left out of the
check: ``repair.py``, which computes the interrupted-turn closers from the open turn's steps, calls and results, and
``upgrade/``, which converts whole logs between format versions and names every type it converts.
"""

from __future__ import annotations

import ast
from pathlib import Path

from dsh_todo.harness.event_types import KNOWN_SESSION_EVENT_TYPES

PERSISTENCE = Path(__file__).resolve().parents[3] / "src" / "dsh_todo" / "harness" / "persistence"

KNOWN_TO_STORAGE = {
    "turn/start": "opens the turn recovery closes; a pass keeps the open turn from it on",
    "turn/end": "closes it; the crash-tail rule (damage before a later turn/end is committed) and checkpoints",
    "assistant/chunk": "the events format v0's packed chunk rows stand for",
    "session/end-seed": "DSH's load appends it after recovery",
}


def _named(path: Path) -> set[str]:
    """The known event types ``path`` holds as string constants."""
    return {node.value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in
            KNOWN_SESSION_EVENT_TYPES}


def test_storage_names_no_event_type_but_recoverys_and_the_formats() -> None:
    """Repro: ``jsonl/bulk.py`` named ``todo/write`` (it re-implemented the plan rule to pick what a reader's pass
    handed over: the last ``todo/write`` whose ``data.todos`` is a list, and ``data`` required on it)."""
    named = {path.relative_to(PERSISTENCE).as_posix(): _named(path) for path in sorted(PERSISTENCE.rglob("*.py"))
             if path.name != "repair.py" and "upgrade" not in path.parts}
    assert {name: sorted(types - set(KNOWN_TO_STORAGE)) for name, types in named.items()
            if types - set(KNOWN_TO_STORAGE)} == {}
    assert set().union(*named.values()) == set(KNOWN_TO_STORAGE)
