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
- ``shutdownTimeoutMillis`` (3000): how long disposal waits for the SDK to drain. The SDK's shutdown waits for its
  export thread, which waits on the collector; past this bound disposal goes on and what is still queued is lost;
- ``spans`` (ours: DSH exports logs only): in ``FULL``, the GenAI spans of :mod:`.spans` go beside the logs through
  a ``TracerProvider`` → ``BatchSpanProcessor`` → the OTLP/HTTP span exporter, whenever a traces endpoint is named
  (``spans.exporter.endpoint``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``) and
  ``OTEL_TRACES_EXPORTER`` is not ``none``; ``spans.exporter`` / ``spans.processor`` are the SDK's own settings,
  passed as they are; ``spans: false`` turns them off.

The SDK is imported only when the plugin is applied in an uploading mode.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlparse

from dsh_todo.harness.context import Context
from dsh_todo.harness.errors import ConfigError
from dsh_todo.harness.telemetry.coordinator import Coordinator
from dsh_todo.harness.telemetry.record import TelemetryRecord
from dsh_todo.harness.telemetry.service import Sharing

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.trace import TracerProvider

    from dsh_todo.harness.session import Event, Session
    from dsh_todo.harness.telemetry.spans import GenAiSpans

name: Final = "@deepseek-ai/dsh-session-telemetry-otel"
inject: Final = ["sessions", "session_telemetry"]

log = logging.getLogger("dsh_todo.telemetry")

Mode = Literal["FULL", "FEEDBACK_ONLY", "DISABLED"]
MODES: Final[tuple[Mode, ...]] = ("FULL", "FEEDBACK_ONLY", "DISABLED")
SHARING: Final[dict[Mode, Sharing]] = {"FULL": "full", "FEEDBACK_ONLY": "feedback-only", "DISABLED": "disabled"}

LEDGER_SCOPE: Final = "@deepseek-ai/dsh-session-telemetry-otel"
OPS_SCOPE: Final = "@deepseek-ai/dsh-session-telemetry-otel/ops"
SERVICE_NAME: Final = "dsh-todo"

DEFAULT_SHUTDOWN_TIMEOUT_MILLIS: Final = 3_000
MAX_SHUTDOWN_TIMEOUT_MILLIS: Final = 2**31 - 1
"""DSH's bound (Node's largest timer delay), kept so a config moves between the two unchanged."""

DISABLED_FEEDBACK_WARNING: Final = ("session telemetry is DISABLED; nothing will be shared and this feedback "
                                    "remains local")
NON_CANONICAL_FEEDBACK_WARNING: Final = ("session telemetry ignored a feedback event absent from the canonical "
                                         "session log")
FEED_INTERVAL_S: Final = 0.05
"""How often the feeder thread hands queued records to the SDK."""
_SEVERITY: Final = {"info": (9, "INFO"), "warn": (13, "WARN"), "error": (17, "ERROR")}


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


def _http_url(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{name}: {what} must be a non-empty URL string")
    scheme = urlparse(value).scheme
    if scheme not in ("http", "https"):
        raise ConfigError(f"{name}: {what} must be http(s), got {value!r}")
    return value


def _block(raw: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key, {})
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name}: '{key}' must be a mapping of the SDK's own settings")
    return dict(value)


@dataclass(frozen=True, slots=True)
class Spans:
    """The ``spans`` block (ours; DSH exports logs only): the SDK's ``OTLPSpanExporter`` and ``BatchSpanProcessor``
    settings, passed as they are."""

    exporter: dict[str, Any] = field(default_factory=dict)
    processor: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Any) -> Spans | None:
        if raw is False:
            return None
        raw = {} if raw is None or raw is True else raw
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{name}: 'spans' must be false or a mapping with 'exporter' and 'processor'")
        unknown = set(raw) - {"exporter", "processor"}
        if unknown:
            raise ConfigError(f"{name}: unknown spans keys {sorted(unknown)}")
        exporter = _block(raw, "exporter")
        if "endpoint" in exporter:
            _http_url(exporter["endpoint"], "spans.exporter.endpoint")
        return cls(exporter, _block(raw, "processor"))


@dataclass(frozen=True, slots=True)
class Config:
    mode: Mode = "DISABLED"
    exporter: dict[str, Any] = field(default_factory=dict)
    processor: dict[str, Any] = field(default_factory=dict)
    shutdownTimeoutMillis: float = DEFAULT_SHUTDOWN_TIMEOUT_MILLIS  # DSH's key names, kept verbatim
    spans: Spans | None = field(default_factory=Spans)
    """GenAI spans beside the logs, in ``FULL`` only, when a traces endpoint is named (:func:`spans_endpoint`);
    ``spans: false`` turns them off."""

    def spans_endpoint(self) -> str | None:
        """Where this config's spans go, or ``None`` for none."""
        if self.mode != "FULL" or self.spans is None:
            return None
        return spans_endpoint(self.spans.exporter.get("endpoint"))

    @classmethod
    def parse(cls, raw: Any) -> Config:
        """Checked as DSH checks it: the mode first (an unknown one fails before any transport setting is read),
        and in ``DISABLED`` nothing else is read at all."""
        raw = {} if raw is None else raw
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{name}: config must be a mapping")
        unknown = set(raw) - {"mode", "exporter", "processor", "shutdownTimeoutMillis", "spans"}
        if unknown:
            raise ConfigError(f"{name}: unknown config keys {sorted(unknown)}")
        mode = raw.get("mode", "DISABLED")
        if mode not in MODES:
            raise ConfigError(f"{name}: unsupported mode {mode!r} (FULL, FEEDBACK_ONLY or DISABLED)")
        if mode == "DISABLED":
            return cls()
        exporter = _block(raw, "exporter")
        if "endpoint" in exporter:
            _http_url(exporter["endpoint"], "exporter.endpoint")
        else:
            found = endpoint("logs")
            if found is None:
                raise ConfigError(f"{name}: exporter.endpoint is required (the full OTLP logs endpoint), or set "
                                  "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT")
            _http_url(os.environ[found[1]], found[1])
        timeout = raw.get("shutdownTimeoutMillis", DEFAULT_SHUTDOWN_TIMEOUT_MILLIS)
        if (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout)
                or not 0 < timeout <= MAX_SHUTDOWN_TIMEOUT_MILLIS):
            raise ConfigError(f"{name}: shutdownTimeoutMillis must be a positive finite number no greater than "
                              f"{MAX_SHUTDOWN_TIMEOUT_MILLIS}, got {timeout!r}")
        return cls(mode, exporter, _block(raw, "processor"), timeout, Spans.parse(raw.get("spans")))


def _exporter_options(block: Mapping[str, Any]) -> dict[str, Any]:
    """An exporter block as the SDK's keyword arguments: ``compression`` from its string (YAML cannot spell the SDK's
    enum), the rest as it is."""
    from opentelemetry.exporter.otlp.proto.http import Compression

    options = dict(block)
    if isinstance(options.get("compression"), str):
        options["compression"] = Compression(options["compression"])
    return options


class OtelBackend:
    """The SDK pipeline seen as a telemetry backend: each record becomes one ``logger.emit`` (and, in ``FULL`` with
    a traces endpoint, feeds the GenAI spans, :mod:`.spans`), made by a feeder thread of ours so that the append path
    only queues it."""

    def __init__(self, config: Config) -> None:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.resources import Resource

        from dsh_todo import __version__
        from dsh_todo.harness.telemetry.user_id import anonymous_user_id

        self.mode = config.mode
        self.shutdown_timeout = config.shutdownTimeoutMillis / 1000
        exporter = OTLPLogExporter(**_exporter_options(config.exporter))
        resource = Resource.create({"service.name": SERVICE_NAME, "service.version": __version__,
                                    "user.id": anonymous_user_id()})
        self.provider: LoggerProvider = LoggerProvider(
            resource=resource,
            shutdown_on_exit=False)  # the SDK's own exit hook would wait 30 s on a dead collector; ours is bounded
        self.provider.add_log_record_processor(BatchLogRecordProcessor(exporter, **config.processor))
        ledger = self.provider.get_logger(LEDGER_SCOPE, __version__)
        ops = self.provider.get_logger(OPS_SCOPE, __version__)
        self._loggers = {"ledger": ledger, "ops": ops}
        self.tracer_provider: TracerProvider | None = None
        self.spans: GenAiSpans | None = None
        if config.spans is not None and config.spans_endpoint() is not None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            from dsh_todo.harness.telemetry.spans import GenAiSpans

            self.tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
            self.tracer_provider.add_span_processor(
                BatchSpanProcessor(OTLPSpanExporter(**_exporter_options(config.spans.exporter)),
                                   **config.spans.processor))
            self.spans = GenAiSpans(self.tracer_provider.get_tracer(LEDGER_SCOPE, __version__))
        self._pending: deque[TelemetryRecord] = deque()
        self._wake = threading.Event()
        """Set once, at shutdown: the feeder hands over what is left and ends."""
        self._closing = False
        self._stopped = False
        self._feeder = threading.Thread(target=self._feed, name="dsh-todo telemetry", daemon=True)
        self._feeder.start()

    def emit(self, record: TelemetryRecord) -> None:
        """Queue one record for the SDK: the append path's whole share of the export, one deque append.

        The SDK's own ``logger.emit`` builds three record objects and a bounded attribute map (some 13 µs here), so
        it runs on this backend's feeder thread instead, which hands the queued records to the SDK in order every
        ``FEED_INTERVAL_S``. Waking the feeder per record would cost the append a cross-thread wake-up (some 6 µs
        measured); polling costs an idle process 20 short wake-ups a second, and adds at most 50 ms to an export
        the SDK batches for a second anyway."""
        self._pending.append(record)

    def _feed(self) -> None:
        pending = self._pending
        while not self._closing:
            self._wake.wait(FEED_INTERVAL_S)
            while pending:
                self._write(pending.popleft())
        while pending:
            self._write(pending.popleft())
        if self.spans is not None:
            self.spans.close(time.time_ns())

    def _write(self, record: TelemetryRecord) -> None:
        """One record as one OTel log record, on its channel's scope."""
        number, text = _SEVERITY[record.severity]
        nanos = record.time * 1_000_000
        try:
            self._loggers[record.channel].emit(timestamp=nanos, observed_timestamp=nanos,
                                               severity_number=_severity_number(number), severity_text=text,
                                               body=record.body, attributes=record.attributes)
        except Exception:
            log.warning("session-telemetry-otel: the SDK refused a record", exc_info=True)
        if self.spans is not None:
            try:
                self.spans.observe(record)
            except Exception:
                log.warning("session-telemetry-otel: a span could not be built", exc_info=True)

    def shutdown(self) -> bool:
        """Hand the SDK what is queued, then drain and stop it, waiting at most ``shutdownTimeoutMillis``; whether it
        finished in time. The wait runs on a daemon thread, so a collector that never answers can delay an exit by
        the bound, never hang it."""
        if self._stopped:
            return True
        self._stopped = True
        finished = threading.Event()

        def drain() -> None:
            try:
                self._closing = True
                self._wake.set()
                self._feeder.join()
                if self.tracer_provider is not None:
                    self.tracer_provider.shutdown()
                self.provider.shutdown()
            except Exception:
                log.warning("session-telemetry-otel: provider shutdown failed", exc_info=True)
            finally:
                finished.set()

        threading.Thread(target=drain, name="dsh-todo telemetry shutdown", daemon=True).start()
        if finished.wait(self.shutdown_timeout):
            return True
        log.warning("session-telemetry-otel: provider shutdown exceeded %sms; records still queued are lost",
                    _millis(self.shutdown_timeout))
        return False


def _severity_number(number: int) -> Any:
    from opentelemetry._logs import SeverityNumber

    return SeverityNumber(number)


def _millis(seconds: float) -> str:
    millis = seconds * 1000
    return str(int(millis)) if millis == int(millis) else str(millis)


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
    seam = ctx.session_telemetry
    sessions = ctx.sessions
    mounted = _Mounted(SHARING[config.mode])
    seam.mount(mounted)  # first: a second backend is refused before anything of this one is built
    if config.mode == "DISABLED":

        def say_local(_session: Session, event: Event) -> None:
            if event["type"] == "feedback/record":
                log.warning(DISABLED_FEEDBACK_WARNING)

        sessions.listen(say_local)
        return
    from dsh_todo.extras import require

    require("otel")
    backend = OtelBackend(config)
    if config.mode == "FULL":
        mounted.direct = backend.emit
        coordinator = Coordinator(ctx.sessions, backend, seam.rules, "live")
    else:
        coordinator = Coordinator(ctx.sessions, backend, seam.rules, "on-demand")

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
