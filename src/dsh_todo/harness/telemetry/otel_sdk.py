"""The OpenTelemetry SDK's pipeline behind ``@deepseek-ai/dsh-session-telemetry-otel`` (:mod:`.otel`): a
``LoggerProvider`` with one ``BatchLogRecordProcessor`` feeding the OTLP/HTTP log exporter, and in ``FULL`` the GenAI
spans (:mod:`.spans`) beside it.

This module imports the SDK (the ``otel`` extra) at its top: it is the lazy boundary. The plugin imports it only
when it is applied in an uploading mode, so a composition that mounts the backend ``DISABLED`` (the default), or
does not mount it, never loads the SDK.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any, Final, cast

from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from dsh_todo import __version__
from dsh_todo.harness.otlp import endpoint
from dsh_todo.harness.telemetry.collector import Watch, Watched, sdk_log
from dsh_todo.harness.telemetry.otel_config import Config
from dsh_todo.harness.telemetry.record import TelemetryRecord
from dsh_todo.harness.telemetry.spans import GenAiSpans
from dsh_todo.harness.telemetry.user_id import anonymous_user_id

log = logging.getLogger("dsh_todo.telemetry")

LEDGER_SCOPE: Final = "@deepseek-ai/dsh-session-telemetry-otel"
OPS_SCOPE: Final = "@deepseek-ai/dsh-session-telemetry-otel/ops"
SERVICE_NAME: Final = "dsh-todo"
FEED_INTERVAL_S: Final = 0.05
"""How often the feeder thread hands queued records to the SDK."""
_SEVERITY: Final = {"info": (9, "INFO"), "warn": (13, "WARN"), "error": (17, "ERROR")}


def _exporter_options(block: Mapping[str, Any]) -> dict[str, Any]:
    """An exporter block as the SDK's keyword arguments: ``compression`` from its string (YAML cannot spell the SDK's
    enum), the rest as it is."""
    options = dict(block)
    if isinstance(options.get("compression"), str):
        options["compression"] = Compression(options["compression"])
    return options


class OtelBackend:
    """The SDK pipeline seen as a telemetry backend: each record becomes one ``logger.emit`` (and, in ``FULL`` with
    a traces endpoint, feeds the GenAI spans, :mod:`.spans`), made by a feeder thread of ours so that the append path
    only queues it."""

    def __init__(self, config: Config) -> None:
        self.mode = config.mode
        self.shutdown_timeout = config.shutdownTimeoutMillis / 1000
        self.watch = Watch()
        """Whether the collector answers: said once, and what the SDK says of each retry kept to ``--debug``."""
        logs_url = endpoint("logs", config.exporter.get("endpoint"))
        exporter = cast(LogRecordExporter, Watched(
            OTLPLogExporter(**_exporter_options(config.exporter)), logs_url[0] if logs_url else "(the SDK's default)",
            self.watch, LogRecordExportResult.SUCCESS, LogRecordExportResult.FAILURE))
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
        spans_url = config.spans_endpoint()
        if config.spans is not None and spans_url is not None:
            self.tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
            span_exporter = cast(SpanExporter, Watched(
                OTLPSpanExporter(**_exporter_options(config.spans.exporter)), spans_url, self.watch,
                SpanExportResult.SUCCESS, SpanExportResult.FAILURE))
            self.tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter, **config.spans.processor))
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
        self.watch.adopt()  # the SDK's "queue full, dropping" lines are logged here, one per record
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
                self.watch.adopt()
                self.watch.close()
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
        say = sdk_log.debug if self.watch.down else log.warning  # a collector said to be down needs no second line
        say("session-telemetry-otel: provider shutdown exceeded %sms; records still queued are lost",
            _millis(self.shutdown_timeout))
        return False


def _severity_number(number: int) -> Any:
    return SeverityNumber(number)


def _millis(seconds: float) -> str:
    millis = seconds * 1000
    return str(int(millis)) if millis == int(millis) else str(millis)
