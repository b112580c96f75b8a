"""The verdict a reader gives a session log: ``ok``, ``recovered`` (and what recovery did), or ``refused`` (why).

One verdict, built in one place, so ``plan``, ``events``, ``sessions``, ``watch`` and the web page can never
disagree about the same log. A refusal carries a ``code`` a carrier can map to its own error vocabulary (the web
page's RPC codes are these very strings) and a one-line ``reason`` a person can act on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, NamedTuple

from dsh_todo.harness.persistence.errors import (
    SessionFormatUnsupportedError,
    SessionLogError,
    SessionNotFoundError,
)

State = Literal["ok", "recovered", "refused"]
Code = Literal["not-found", "corrupt-log", "unsupported-log", "internal"]

RECOVERED_PREFIX: Final = "recovered in memory (the log is unchanged): "


class Refusal(Exception):
    """A reason this reader will not interpret a log, with its code (raised inside the reader, never past it)."""

    def __init__(self, code: Code, reason: str) -> None:
        super().__init__(reason)
        self.code: Code = code
        self.reason = reason


class Health(NamedTuple):
    """``state`` and, unless ``ok``, a one-line ``reason``; ``code`` is set for refusals only."""

    state: State
    reason: str = ""
    code: Code | None = None

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    @property
    def refused(self) -> bool:
        return self.state == "refused"

    def describe(self) -> str:
        """``ok``, the recovery note, or ``refused: <reason>``: one line for listings."""
        if self.state == "ok":
            return "ok"
        return f"refused: {self.reason}" if self.state == "refused" else self.reason


OK: Final = Health("ok")


def refused(code: Code, reason: str) -> Health:
    # Reasons are one line by contract: a path or an id with a newline in it must not break a listing.
    return Health("refused", " ".join(reason.splitlines()), code)


def refusal_of(exc: BaseException) -> Health:
    """The verdict for an error met while reading (anything else is a bug and propagates)."""
    if isinstance(exc, Refusal):
        return refused(exc.code, exc.reason)
    if isinstance(exc, SessionNotFoundError):
        return refused("not-found", str(exc))
    if isinstance(exc, SessionFormatUnsupportedError):
        return refused("unsupported-log", str(exc))
    if isinstance(exc, SessionLogError):
        return refused("corrupt-log", str(exc))
    if isinstance(exc, OSError):
        where = f" {exc.filename}" if exc.filename else ""
        return refused("internal", f"cannot read{where}: {exc.strerror or exc}")
    raise exc


def recovered(torn_at: int | None, cut_frame_events: int, closers: Sequence[Mapping[str, Any]]) -> Health:
    """``ok`` when nothing was recovered; else what the in-memory recovery did, in one line."""
    done: list[str] = []
    if torn_at is not None:
        if cut_frame_events:
            done.append(f"ignored a torn final frame from byte {torn_at} (its complete blocks still gave "
                        f"{cut_frame_events} events)")
        else:
            done.append(f"ignored a torn tail from byte {torn_at}")
    if closers:
        turn = closers[-1].get("data", {}).get("turn")
        kinds = ", ".join(str(event["type"]) for event in closers)
        done.append(f"closed the interrupted turn {turn} with {kinds}")
    if not done:
        return OK
    return Health("recovered", RECOVERED_PREFIX + "; ".join(done))
