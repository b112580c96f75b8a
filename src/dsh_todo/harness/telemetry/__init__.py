"""``@deepseek-ai/dsh-session-telemetry``: the telemetry seam, what leaves a session for observability tools.

Mounting it provides the ``session_telemetry`` service (:class:`~.service.SessionTelemetry`): the redact rules and
the slot for one backend. It captures nothing by itself, so a composition that mounts the seam and no backend pays
nothing per appended event. A backend (``@deepseek-ai/dsh-session-telemetry-otel``, :mod:`.otel`) mounts itself on
the service and composes a :class:`~.coordinator.Coordinator`, which turns events into
:class:`~.record.TelemetryRecord`\\ s and hands them over.

A deployment's redact rules are plugins of its own that inject ``session_telemetry``::

    def apply(ctx):
        def hide_keys(record, next):
            record = next()
            return record._replace(body=scrub(record.body))
        ctx.session_telemetry.rule(hide_keys)   # removed again when that plugin is disposed
"""

from __future__ import annotations

from typing import Final

from dsh_todo.harness.context import Context
from dsh_todo.harness.telemetry.coordinator import Capture, Coordinator, Sink
from dsh_todo.harness.telemetry.record import Channel, Severity, TelemetryRecord
from dsh_todo.harness.telemetry.service import SESSION_TELEMETRY, Backend, Rule, SessionTelemetry, Sharing

__all__ = ["Backend", "Capture", "Channel", "Coordinator", "Rule", "SessionTelemetry", "Severity", "Sharing", "Sink",
           "TelemetryRecord", "apply", "inject", "name"]

name: Final = "@deepseek-ai/dsh-session-telemetry"
inject: Final[list[str]] = []


def apply(ctx: Context) -> None:
    ctx.provide(SESSION_TELEMETRY, SessionTelemetry())
