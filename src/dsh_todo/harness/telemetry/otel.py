"""``@deepseek-ai/dsh-session-telemetry-otel``: session telemetry as OpenTelemetry logs over OTLP/HTTP.

The OpenTelemetry Python SDK as it is: a ``LoggerProvider`` with one ``BatchLogRecordProcessor`` feeding the OTLP/HTTP
log exporter (the ``otel`` extra). Each record becomes one ``logger.emit`` on one of DSH's two instrumentation scopes
(``@deepseek-ai/dsh-session-telemetry-otel`` for ledger records, ``…/ops`` for operational ones): ``time`` → timestamp
and observed timestamp, severity → number and text (INFO 9, WARN 13, ERROR 17), the body as a structured value, the
attributes as they are. The resource carries ``service.name``/``service.version`` and the anonymous ``user.id``
(:mod:`.user_id`), once per batch. After ``emit`` everything (batching, the export thread, retries, what is lost when
the collector is down) is the SDK's, tuned through ``processor`` and ``exporter``, which are passed to it untouched,
and through the ``OTEL_*`` variables the SDK reads.

Config (DSH's names for DSH's settings; the SDK's own names inside its two blocks):

- ``mode``: ``FULL`` (every record as it happens), ``FEEDBACK_ONLY`` (nothing until a ``feedback/record`` event, which
  releases the log through itself), ``DISABLED`` (the default: nothing is built, nothing leaves; a feedback event
  says so in the log output);
- ``exporter``: keyword arguments of the SDK's ``OTLPLogExporter`` (``endpoint``, ``headers``, ``timeout``,
  ``compression`` as ``"gzip"``/``"deflate"``/``"none"``, certificates). An endpoint is required outside ``DISABLED``,
  given here or by ``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT``/``OTEL_EXPORTER_OTLP_ENDPOINT``: DSH has no default
  collector, and neither do we (the SDK would otherwise post to localhost);
- ``processor``: keyword arguments of the SDK's ``BatchLogRecordProcessor`` (``schedule_delay_millis``,
  ``max_export_batch_size``, ``max_queue_size``, ``export_timeout_millis``);
- ``shutdownTimeoutMillis`` (``$DSH_TODO_TELEMETRY_SHUTDOWN_TIMEOUT_MILLIS``, else 3000): how long disposal waits
  for the SDK to drain. The SDK's shutdown waits for its export thread, which waits on the collector; past this bound
  disposal goes on and what is still queued is lost. A collector already known not to answer is not waited for at
  all (:mod:`.collector`);
- ``spans`` (ours: DSH exports logs only): in ``FULL``, the GenAI spans of :mod:`.spans` go beside the logs through
  a ``TracerProvider`` → ``BatchSpanProcessor`` → the OTLP/HTTP span exporter, whenever a traces endpoint is named
  (``spans.exporter.endpoint``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``) and
  ``OTEL_TRACES_EXPORTER`` is not ``none``; ``spans.exporter`` / ``spans.processor`` are the SDK's own settings,
  passed as they are; ``spans: false`` turns them off.

The SDK is imported only when the plugin is applied in an uploading mode: the pipeline lives in :mod:`.otel_sdk`,
which imports it at its top, and :func:`apply` imports that module where it decides to upload. Where a collector is
named (:func:`endpoint`) and how a mode reads as sharing (:data:`SHARING`) live in :mod:`dsh_todo.harness.otlp`,
which front doors read before anything boots.
"""

from __future__ import annotations

import atexit
import logging
from collections.abc import Callable
from typing import Final

from dsh_todo.extras import require
from dsh_todo.harness.context import Context
from dsh_todo.harness.event_types import Event
from dsh_todo.harness.otlp import MODES as MODES
from dsh_todo.harness.otlp import SHARING as SHARING
from dsh_todo.harness.otlp import Mode as Mode
from dsh_todo.harness.otlp import Signal as Signal
from dsh_todo.harness.otlp import endpoint as endpoint
from dsh_todo.harness.otlp import spans_endpoint as spans_endpoint
from dsh_todo.harness.session import SESSIONS, Session
from dsh_todo.harness.telemetry.coordinator import Coordinator
from dsh_todo.harness.telemetry.otel_config import Config as Config  # the plugin's ``Config``, read by the loader
from dsh_todo.harness.telemetry.otel_config import name as name
from dsh_todo.harness.telemetry.record import TelemetryRecord
from dsh_todo.harness.telemetry.service import SESSION_TELEMETRY, Sharing

inject: Final = ["sessions", "session_telemetry"]

log = logging.getLogger("dsh_todo.telemetry")

DISABLED_FEEDBACK_WARNING: Final = ("session telemetry is DISABLED; nothing will be shared and this feedback "
                                    "remains local")
NON_CANONICAL_FEEDBACK_WARNING: Final = ("session telemetry ignored a feedback event absent from the canonical "
                                         "session log")


class _Mounted:
    """What the ``session_telemetry`` service sees: the disclosure, and direct records only in ``FULL``."""

    def __init__(self, sharing: Sharing) -> None:
        self._sharing: Sharing = sharing
        self.direct: Callable[[TelemetryRecord], None] | None = None

    @property
    def sharing(self) -> Sharing:
        return self._sharing

    def emit(self, record: TelemetryRecord) -> None:
        if self.direct is not None:
            self.direct(record)


def apply(ctx: Context, config: Config) -> None:
    seam = ctx[SESSION_TELEMETRY]
    sessions = ctx[SESSIONS]
    mounted = _Mounted(SHARING[config.mode])
    seam.mount(mounted)  # first: a second backend is refused before anything of this one is built
    if config.mode == "DISABLED":

        def say_local(_session: Session, event: Event) -> None:
            if event["type"] == "feedback/record":
                log.warning(DISABLED_FEEDBACK_WARNING)

        sessions.listen(say_local)
        return
    require("otel")
    from dsh_todo.harness.telemetry.otel_sdk import OtelBackend  # the one door to the SDK (the ``otel`` extra)

    backend = OtelBackend(config)
    if config.mode == "FULL":
        mounted.direct = backend.emit
        coordinator = Coordinator(ctx[SESSIONS], backend, seam.rules, "live")
    else:
        coordinator = Coordinator(ctx[SESSIONS], backend, seam.rules, "on-demand")

        def release(session: Session, event: Event) -> None:
            if event["type"] != "feedback/record":
                return
            seq = event["seq"]
            events = session.events
            if not (0 <= seq < len(events) and events[seq] is event):  # consent is the logged event, nothing else
                log.warning(NON_CANONICAL_FEEDBACK_WARNING)
                return
            coordinator.capture_session(session, seq)

        sessions.listen(release)

    def stop() -> None:
        """At disposal, or at exit for a context nobody disposed: the ``shutdown`` records of live sessions first,
        then the pipeline drains them, within its bound."""
        atexit.unregister(stop)
        coordinator.stop()
        backend.shutdown()

    atexit.register(stop)
    ctx.on_dispose(stop)
