"""Where the OpenTelemetry backend (:mod:`dsh_todo.harness.telemetry.otel`) sends, and what each of its modes
shares: read by front doors before anything boots (``--telemetry`` is refused in one line when no collector is
named) and by the backend itself.

Outside the ``telemetry`` package on purpose: that package's ``__init__`` is the seam's plugin, with the plugin tree
and the coordinator behind it, and a ``dsh-todo plan`` process resolves its storage with the module
(:mod:`dsh_todo.runtime`) that checks these settings. A reader must pay for neither.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from dsh_todo.harness.telemetry.service import Sharing

Mode = Literal["FULL", "FEEDBACK_ONLY", "DISABLED"]
MODES: Final[tuple[Mode, ...]] = ("FULL", "FEEDBACK_ONLY", "DISABLED")
SHARING: Final[dict[Mode, Sharing]] = {"FULL": "full", "FEEDBACK_ONLY": "feedback-only", "DISABLED": "disabled"}

Signal = Literal["logs", "traces"]


def endpoint(signal: Signal, explicit: str | None = None) -> tuple[str, str] | None:
    """Where the SDK's OTLP/HTTP exporter of ``signal`` posts, as it resolves it, and what named it: ``explicit``
    (the config's ``exporter.endpoint``) or ``OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT`` as they are, else
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` with the signal's path (``/v1/logs``) appended; ``None`` when nothing names one
    (the SDK would then post to localhost, which we never let it do). For the disclosure line, which must name the
    very URL the records go to."""
    if explicit:
        return explicit, "exporter.endpoint"
    variable = f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT"
    if os.environ.get(variable):
        return os.environ[variable], variable
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if base:
        return base + ("" if base.endswith("/") else "/") + f"v1/{signal}", "OTEL_EXPORTER_OTLP_ENDPOINT"
    return None


def spans_endpoint(explicit: str | None = None) -> str | None:
    """Where ``FULL``'s GenAI spans go (:func:`endpoint` for traces), or ``None``: no traces endpoint is named, or
    ``OTEL_TRACES_EXPORTER=none`` (the SDK's own word for "no spans") turns them off. A deployment that names only a
    logs endpoint gets logs only, as before spans existed."""
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    found = endpoint("traces", explicit)
    return found[0] if found is not None else None


