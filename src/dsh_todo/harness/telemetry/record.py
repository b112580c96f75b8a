"""The one thing telemetry hands a backend: a :class:`TelemetryRecord`, built from a log event or an operational signal.

DSH's logical record, field for field. Ledger records mirror log events one to one and carry the event's identity
(``session.id``, ``event.type``, ``event.seq``) plus what the session header says about where the stream comes from
(``session.cwd``, ``session.parent_id``, ``session.seed_length``); nothing recoverable from the body is repeated in the
attributes. Operational records (``ops``) are the two signals the log has no home for, ``agent-error`` and
``shutdown``; they carry no ``event.seq``/``event.type``, so a receiver that dedupes ledger rows on
``(session.id, event.seq)`` can never count one as a row.

The body of a ledger record is the event's own ``data``: it is frozen (:mod:`dsh_todo.harness.frozen`), so it can
neither change under a backend that serializes it later nor be changed by a redact rule. That is what DSH's deep copy
buys in JavaScript; here immutability gives it without copying on the append path.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

from dsh_todo.harness.tool_results import answers

if TYPE_CHECKING:
    from dsh_todo.harness.event_types import Event
    from dsh_todo.harness.session import Session

Channel = Literal["ledger", "ops"]
Severity = Literal["info", "warn", "error"]
"""Pre-mapped so a receiver can alert with no configuration; ``warn`` is left to redact rules and backends."""

Attributes = Mapping[str, str | int]


class TelemetryRecord(NamedTuple):
    """One outbound record. Immutable: a redact rule returns a new one (``record._replace(body=…)``) instead of
    editing. A named tuple because one is built per appended event: it costs a third of a frozen dataclass."""

    channel: Channel
    time: int
    """Epoch milliseconds: the event's append time (ledger), the moment of the signal (ops)."""
    severity: Severity
    attributes: Attributes
    body: Any


SHUTDOWN_BODY: Final = {"op": "shutdown"}


def severity_of(event: Event) -> Severity:
    """``error`` when the event's own outcome says so (a ``tool/result`` whose block is an error, a ``turn/end`` whose
    reason is an error); ``info`` for everything else, event types this harness never heard of included."""
    kind = event["type"]
    if kind == "tool/result":
        data = event["data"]
        found = answers(data.get("message")) if isinstance(data, Mapping) else []
        return "error" if found and found[0].is_error else "info"
    if kind == "turn/end":
        reason = event["data"].get("reason")
        return "error" if isinstance(reason, Mapping) and reason.get("kind") == "error" else "info"
    return "info"


def identity_of(session: Session, event: Event) -> dict[str, str | int]:
    """The ledger attributes: the event's identity plus the header's self-contained facts, when it has them."""
    facts = session.extensions.get(_HEADER_FACTS)
    if facts is None:  # a header's facts never change once the session is live: read them once
        facts = session.extensions[_HEADER_FACTS] = header_facts(session.header)
    return {"session.id": session.id, "event.type": event["type"], "event.seq": event["seq"], **facts}


_HEADER_FACTS: Final = object()
"""Where :func:`identity_of` keeps a session's header facts, in ``session.extensions``."""


def header_facts(header: Mapping[str, Any]) -> dict[str, str | int]:
    """``session.cwd``, ``session.parent_id`` and ``session.seed_length``, those the header has."""
    facts: dict[str, str | int] = {}
    cwd = header.get("cwd")
    if isinstance(cwd, str):
        facts["session.cwd"] = cwd
    parent = header.get("parentSession")
    if parent is not None:
        facts["session.parent_id"] = str(parent)
    seed_length = header.get("seedLength")
    if type(seed_length) is int:
        facts["session.seed_length"] = seed_length
    return facts


def ledger_record(session: Session, event: Event) -> TelemetryRecord:
    return TelemetryRecord("ledger", event["time"], severity_of(event), identity_of(session, event), event["data"])


def shutdown_record(session: Session) -> TelemetryRecord:
    """The clean-exit marker of one session: at its close, or when telemetry stops while it is still live."""
    return TelemetryRecord("ops", now_ms(), "info", {"telemetry.op": "shutdown", "session.id": session.id},
                           dict(SHUTDOWN_BODY))


def agent_error_record(agent_id: str, session: Session, turn: int, step: int,
                       error: BaseException) -> TelemetryRecord:
    """An agent's failure as a stable ``{name, message}`` body, whatever was raised."""
    detail = {"name": type(error).__name__, "message": str(error)}
    attributes: dict[str, str | int] = {"telemetry.op": "agent-error", "session.id": session.id,
                                        "agent.id": agent_id, "error.name": detail["name"], "turn": turn,
                                        "step": step}
    return TelemetryRecord("ops", now_ms(), "error", attributes, detail)


def now_ms() -> int:
    return time.time_ns() // 1_000_000
