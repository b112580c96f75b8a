"""The ``session_telemetry`` service: the redact rules every record passes, and the one backend they lead to.

DSH splits telemetry into a seam and a backend; the seam owns the vocabulary (the record, the sharing statuses) and
the redaction extension point, so a deployment writes its rules once whatever backend it mounts, and a consumer (a
``/feedback`` acknowledgement) can say what is shared without knowing the backend. Here the seam is this service,
provided by ``@deepseek-ai/dsh-session-telemetry``; a backend plugin injects it and :meth:`SessionTelemetry.mount`\\ s
itself (one at a time, as DSH's service registration allows one).

Redact rules are DSH's ``session-telemetry/record`` waterfall: ``rule(record, next)`` returns the record that leaves.
The first rule added is the outermost; ``next()`` runs the rules beneath and returns their record (the innermost
``next`` returns the record as captured); returning without calling it replaces everything beneath; raising withholds
the record. The seam ships no rules: with none added, records leave exactly as captured.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Literal, Protocol

from dsh_todo.harness.disposer import Disposer
from dsh_todo.harness.service_key import ServiceKey
from dsh_todo.harness.telemetry.record import TelemetryRecord

Sharing = Literal["full", "feedback-only", "disabled"]
"""What a mounted backend discloses about what leaves the machine (DSH's ``SessionTelemetrySharingStatus``)."""

SHARES: Final[dict[Sharing, str]] = {
    "full": "every event of every session (prompts, replies, tool calls and their results) leaves as it is appended",
    "feedback-only": "nothing leaves until a feedback event; then that session's log up to it leaves",
    "disabled": "nothing leaves this machine",
}
"""Each sharing status in words, for the one line a front door prints (``dsh-todo run --telemetry full``): the
seam owns the statuses, so it owns what they mean to the person whose sessions they are."""

Rule = Callable[[TelemetryRecord, Callable[[], TelemetryRecord]], TelemetryRecord]


def redact(rules: Sequence[Rule], record: TelemetryRecord) -> TelemetryRecord:
    """``record`` through ``rules`` (first outermost); raises when a rule withholds it."""
    if not rules:
        return record

    def layer(index: int) -> TelemetryRecord:
        if index == len(rules):
            return record
        return rules[index](record, lambda: layer(index + 1))

    return layer(0)


class Backend(Protocol):
    """A mounted backend: its disclosure and its direct hand-off (what ``session_telemetry.emit`` reaches)."""

    @property
    def sharing(self) -> Sharing: ...

    def emit(self, record: TelemetryRecord) -> None: ...


class SessionTelemetry:
    """The ``session_telemetry`` service."""

    def __init__(self) -> None:
        self.rules: list[Rule] = []
        """The redact rules, outermost first; a coordinator reads this very list, so it sees rules added later."""
        self._backend: Backend | None = None

    # -- redaction --------------------------------------------------------------------------------------------

    def rule(self, rule: Rule) -> Disposer:
        """Add a redact rule (innermost so far); the disposer removes it."""
        rules = self.rules
        rules.append(rule)
        return Disposer(lambda: rules.remove(rule) if rule in rules else None)

    def redact(self, record: TelemetryRecord) -> TelemetryRecord:
        """The record as the rules let it leave; raises when a rule withholds it."""
        return redact(self.rules, record)

    # -- the backend --------------------------------------------------------------------------------------------

    def mount(self, backend: Backend) -> Disposer:
        """Make ``backend`` the one this context reports to; a second one is refused, as DSH refuses it."""
        if self._backend is not None:
            raise ValueError("a session telemetry backend is already mounted")
        self._backend = backend

        def unmount() -> None:
            if self._backend is backend:
                self._backend = None

        return Disposer(unmount)

    @property
    def sharing(self) -> Sharing | None:
        """The mounted backend's disclosure, or ``None``: telemetry is not configured at all."""
        return self._backend.sharing if self._backend is not None else None

    def emit(self, record: TelemetryRecord) -> None:
        """Hand a record straight to the backend (which decides whether its mode accepts direct records)."""
        if self._backend is not None:
            self._backend.emit(record)


SESSION_TELEMETRY: Final[ServiceKey[SessionTelemetry]] = ServiceKey("session_telemetry")
"""The telemetry seam's key: ``ctx[SESSION_TELEMETRY]``."""
