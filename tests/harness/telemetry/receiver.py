"""A real OTLP/HTTP receiver for tests: an HTTP server on 127.0.0.1 that decodes what the SDK's exporters post.

It answers ``POST /v1/logs`` and ``POST /v1/traces`` as a collector does (an ``Export…ServiceResponse``), decodes
each request with ``opentelemetry-proto`` (gunzipping or inflating first when the exporter compressed it) and keeps
every log record and span as plain Python values, with its scope and resource, so a test compares exactly what went
over the wire. ``url`` is the logs endpoint, ``base`` what ``OTEL_EXPORTER_OTLP_ENDPOINT`` names (the SDK appends
each signal's path to it).
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


def value_of(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as the Python value it carries."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value_of(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    return getattr(value, kind)


def attributes_of(pairs: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pair in pairs:
        assert isinstance(pair, KeyValue)
        found[pair.key] = value_of(pair.value)
    return found


@dataclass
class Received:
    """One decoded log record and where it came from."""

    scope: str
    scope_version: str
    resource: dict[str, Any]
    time_unix_nano: int
    observed_time_unix_nano: int
    severity_number: int
    severity_text: str
    body: Any
    attributes: dict[str, Any]


@dataclass
class Span:
    """One decoded span: ids as hex (the parent's empty for a root), kind and status code as the proto's numbers
    (kind 1 internal, 3 client; status 0 unset, 1 ok, 2 error)."""

    scope: str
    resource: dict[str, Any]
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    start_time_unix_nano: int
    end_time_unix_nano: int
    attributes: dict[str, Any]
    status_code: int
    status_message: str


@dataclass
class Receiver:
    url: str
    base: str = ""
    records: list[Received] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    requests: list[dict[str, str]] = field(default_factory=list)
    """Each request's headers (lower-cased names), with its path under ``:path``."""


def _logs(payload: bytes) -> tuple[list[Received], bytes]:
    request = ExportLogsServiceRequest()
    request.ParseFromString(payload)
    decoded: list[Received] = []
    for resource_logs in request.resource_logs:
        resource = attributes_of(resource_logs.resource.attributes)
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                decoded.append(Received(
                    scope_logs.scope.name, scope_logs.scope.version, resource, record.time_unix_nano,
                    record.observed_time_unix_nano, record.severity_number, record.severity_text,
                    value_of(record.body), attributes_of(record.attributes)))
    return decoded, ExportLogsServiceResponse().SerializeToString()


def _traces(payload: bytes) -> tuple[list[Span], bytes]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(payload)
    decoded: list[Span] = []
    for resource_spans in request.resource_spans:
        resource = attributes_of(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                decoded.append(Span(
                    scope_spans.scope.name, resource, span.name, span.trace_id.hex(), span.span_id.hex(),
                    span.parent_span_id.hex(), span.kind, span.start_time_unix_nano, span.end_time_unix_nano,
                    attributes_of(span.attributes), span.status.code, span.status.message))
    return decoded, ExportTraceServiceResponse().SerializeToString()


def _handler(receiver: Receiver, lock: threading.Lock) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            payload = self.rfile.read(length)
            encoding = self.headers.get("Content-Encoding", "")
            if encoding == "gzip":
                payload = gzip.decompress(payload)
            elif encoding == "deflate":
                payload = zlib.decompress(payload)
            headers = {k.lower(): v for k, v in self.headers.items()}
            headers[":path"] = self.path
            if self.path.endswith("/v1/traces"):
                spans, body = _traces(payload)
                with lock:
                    receiver.requests.append(headers)
                    receiver.spans.extend(spans)
            else:
                records, body = _logs(payload)
                with lock:
                    receiver.requests.append(headers)
                    receiver.records.extend(records)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """A receiver listening on a free port of 127.0.0.1 for the duration of the block."""
    receiver = Receiver("")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver, threading.Lock()))
    receiver.base = f"http://127.0.0.1:{server.server_address[1]}"
    receiver.url = f"{receiver.base}/v1/logs"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="otlp receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
