"""Whether the collector takes what the OTel backend (:mod:`.otel_sdk`) exports: said once, in one line of ours.

The SDK's exporters say every retry through Python logging (``Transient error … retrying in 0.86s``), and its batch
processors every record dropped from a full queue: with no logging set up, Python's last-resort handler writes each
to stderr. A dead collector put about 7 lines per 8 seconds into an MCP server's stderr (which clients keep as its
log: some 3,000 an hour) and 4 or 5 into a one-turn ``run``. Here our exporters are wrapped (:class:`Watched`): what
the SDK logs on our pipeline's threads (our feeder, the processors' workers while they run our exporters, our
drain) goes to the ``dsh_todo.telemetry.sdk`` logger at debug level (``--debug`` shows it) and never further, and
the first failure says ``telemetry: cannot export to the collector at URL: REASON; telemetry is dropped until it
answers`` once, and once more only after an export got through again. Another OTel pipeline in the same process
(an application's own) keeps its lines: the filter looks at the thread, not at the logger alone.

It also knows, at exit, that the collector is not answering: the exports still queued are dropped at once and a
retry waiting out its back-off is woken, rather than each costing the drain bound (a one-turn ``run`` took 3.4 s
instead of 0.19 s against a collector that refused connections).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from typing import Any, Final

log = logging.getLogger("dsh_todo.telemetry")
sdk_log = logging.getLogger("dsh_todo.telemetry.sdk")

SDK_LOGGERS: Final = ("opentelemetry.exporter.otlp.proto.http._log_exporter",
                      "opentelemetry.exporter.otlp.proto.http.trace_exporter",
                      "opentelemetry.sdk._shared_internal")
"""Where the SDK logs its exporters' retries and failures and its batch processors' drops."""

UNREACHABLE: Final = "telemetry: cannot export to the collector at %s: %s; telemetry is dropped until it answers"

_threads = threading.local()
"""``watch``: the :class:`Watch` whose pipeline runs on this thread; ``exporter``: the :class:`Watched` exporting."""


class _Ours(logging.Filter):
    """On the SDK's loggers: a record logged on one of our pipeline's threads goes to our watch, and no further."""

    def filter(self, record: logging.LogRecord) -> bool:
        watch: Watch | None = getattr(_threads, "watch", None)
        if watch is None:
            return True
        watch.heard(record)
        return False


_OURS: Final = _Ours()


def _install() -> None:
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if _OURS not in logger.filters:
            logger.addFilter(_OURS)


def reason_of(record: logging.LogRecord) -> str | None:
    """Why an export failed, in a few words, from the SDK's line about it; ``None`` for a line that says nothing of
    why (``Failed to export … due to timeout, max retries or shutdown``, a dropped record)."""
    args = record.args if isinstance(record.args, tuple) else ()
    message = str(record.msg)
    if message.startswith("Transient error") and args:
        return _short(args[0])
    if message.startswith("Failed to export") and "code:" in message and len(args) == 2:
        code, reason = args
        return f"HTTP {code} {reason}" if code is not None else _short(reason)
    return None


def _short(reason: object) -> str:
    if isinstance(reason, BaseException):
        text = str(reason)
        errno = re.search(r"\[Errno -?\d+\] ([^'\"()]+)", text)
        if errno is not None:
            return errno[1].strip().rstrip(".")
        if "timed out" in text.lower():
            return "timed out"
        return type(reason).__name__
    return f"answered {reason}" if reason else "the export failed"


class Watch:
    """One backend's view of its collector: which endpoints are failing, whether it is closing."""

    def __init__(self) -> None:
        _install()
        self._lock = threading.Lock()
        self._failing: set[str] = set()
        self.closing = False
        """Set at the start of the drain: from then on, a collector that fails is not waited for."""
        self.exporters: list[Watched] = []

    @property
    def down(self) -> bool:
        """Whether an export failed since the last one got through."""
        return bool(self._failing)

    def adopt(self) -> None:
        """The calling thread runs this pipeline: what the SDK logs on it is ours to say or keep quiet."""
        _threads.watch = self

    def heard(self, record: logging.LogRecord) -> None:
        """A line the SDK logged on our pipeline: debug only; a failure it reports marks the collector down."""
        if sdk_log.isEnabledFor(logging.DEBUG):
            sdk_log.debug("%s: %s", record.name, record.getMessage())
        exporter: Watched | None = getattr(_threads, "exporter", None)
        if exporter is not None:
            reason = reason_of(record)
            if reason is not None:
                self.failed(exporter.url, reason)

    def failed(self, url: str, reason: str) -> None:
        with self._lock:
            first = not self._failing
            self._failing.add(url)
        if first:
            log.warning(UNREACHABLE, url, reason)
        if self.closing:
            self.abort()

    def answered(self, url: str) -> None:
        with self._lock:
            self._failing.discard(url)

    def close(self) -> None:
        """The drain starts: if the collector is already known down, nothing more is waited for."""
        self.closing = True
        if self.down:
            self.abort()

    def abort(self) -> None:
        for exporter in self.exporters:
            exporter.abort()


class Watched:
    """An SDK exporter (logs or spans) that tells its :class:`Watch` how each export went, by the SDK's own result;
    the processor calls it as it calls any exporter (``export``, ``shutdown``, ``force_flush``)."""

    def __init__(self, inner: Any, url: str, watch: Watch, success: Any, failure: Any) -> None:
        self.inner = inner
        self.url = url
        self.watch = watch
        self.success = success
        self.failure = failure
        self._aborted = False
        self._lock = threading.Lock()
        watch.exporters.append(self)

    def export(self, batch: Sequence[Any]) -> Any:
        watch = self.watch
        watch.adopt()  # the processor's worker thread, which only ever runs this exporter
        if watch.closing and watch.down:
            sdk_log.debug("dropped %d at exit: the collector at %s is not answering", len(batch), self.url)
            return self.failure
        _threads.exporter = self
        try:
            result = self.inner.export(batch)
        except Exception as exc:  # the processor would log it with a traceback, per batch
            watch.failed(self.url, _short(exc))
            return self.failure
        finally:
            _threads.exporter = None
        if result == self.success:
            watch.answered(self.url)
        elif not self._aborted:
            watch.failed(self.url, "the export failed")
        return result

    def abort(self) -> None:
        """Stop at once: the SDK exporter's shutdown wakes a retry waiting out its back-off and refuses the rest."""
        with self._lock:
            if self._aborted:
                return
            self._aborted = True
        previous = getattr(_threads, "watch", None)
        self.watch.adopt()
        try:
            self.inner.shutdown()
        except Exception:
            sdk_log.debug("the exporter to %s did not shut down", self.url, exc_info=True)
        finally:
            _threads.watch = previous

    def shutdown(self) -> None:
        self.abort()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))
