"""The config of ``@deepseek-ai/dsh-session-telemetry-otel`` (:mod:`.otel`), read as DSH reads it.

Both the plugin (which parses it) and the SDK's pipeline (:mod:`.otel_sdk`, which is built from it) need it; living
here, below both, it lets the plugin import the pipeline where it decides to upload and never the other way round
(the pipeline imported the plugin for this type, a circle of two modules, decision 0044). The plugin re-exports
:class:`Config` as its ``Config``, the attribute the loader reads.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlparse

from dsh_todo.harness.errors import ConfigError
from dsh_todo.harness.otlp import MODES, Mode, endpoint, spans_endpoint

name: Final = "@deepseek-ai/dsh-session-telemetry-otel"
"""The plugin's name, which every config error starts with."""

DEFAULT_SHUTDOWN_TIMEOUT_MILLIS: Final = 3_000
MAX_SHUTDOWN_TIMEOUT_MILLIS: Final = 2**31 - 1
"""DSH's bound (Node's largest timer delay), kept so a config moves between the two unchanged."""

SHUTDOWN_TIMEOUT_VARIABLE: Final = "DSH_TODO_TELEMETRY_SHUTDOWN_TIMEOUT_MILLIS"
"""``shutdownTimeoutMillis`` for a config that does not set it (the front doors' ``--telemetry``): how long an exit
waits for the SDK to drain. None of the SDK's ``OTEL_*`` variables means that: ``OTEL_EXPORTER_OTLP_TIMEOUT`` bounds
one export request (the SDK honours it, and it does shorten a drain stuck on a collector that never answers),
``OTEL_BLRP_EXPORT_TIMEOUT`` / ``OTEL_BSP_EXPORT_TIMEOUT`` one batch's export (the Python SDK reads and ignores
them), each for one signal."""


def _shutdown_timeout_from_environment() -> tuple[object, str]:
    text = os.environ.get(SHUTDOWN_TIMEOUT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_SHUTDOWN_TIMEOUT_MILLIS, "shutdownTimeoutMillis"
    try:
        return float(text), SHUTDOWN_TIMEOUT_VARIABLE
    except ValueError:
        return text, SHUTDOWN_TIMEOUT_VARIABLE


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
        timeout, what = raw.get("shutdownTimeoutMillis"), "shutdownTimeoutMillis"
        if timeout is None:
            timeout, what = _shutdown_timeout_from_environment()
        if (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout)
                or not 0 < timeout <= MAX_SHUTDOWN_TIMEOUT_MILLIS):
            raise ConfigError(f"{name}: {what} must be a positive finite number no greater than "
                              f"{MAX_SHUTDOWN_TIMEOUT_MILLIS}, got {timeout!r}")
        return cls(mode, exporter, _block(raw, "processor"), timeout, Spans.parse(raw.get("spans")))
