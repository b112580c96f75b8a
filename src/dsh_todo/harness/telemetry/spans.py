"""GenAI spans beside the logs: a session's turns, model requests and tool calls as OpenTelemetry spans.

Python observability tools (Logfire, Phoenix, Langfuse, any OTel backend) show an agent as a trace of spans named by
the OpenTelemetry GenAI semantic conventions, not as a stream of log records. The OTel backend in ``FULL`` builds
those spans from the very records it exports as logs, after the redact rules, on its feeder thread: so they cost the
append path nothing more, a withheld record is missing from the spans too, and any agent on our harness (``run``,
``acp``, ``mcp``, the adapters) gets them, since they come from the session's events and not from the loop.

- ``invoke_agent``: one per turn, ``turn/start`` to ``turn/end``, the root of the turn's own trace (kind
  ``INTERNAL``: the agent runs in this process); status ``ERROR`` for an error ``turn/end`` (``error.type`` the
  error's name);
- ``chat {model}``: one per model request, ``step/start`` to the step's ``assistant/message`` (kind ``CLIENT``), with
  ``gen_ai.request.model``, ``gen_ai.provider.name`` and, when the model reported them, ``gen_ai.usage.input_tokens``
  / ``gen_ai.usage.output_tokens``; a step that ends with neither a reply nor a call (the request failed) is a
  ``chat`` span with status ``ERROR``. A step with calls and no reply is no model request of ours: an MCP client's
  call is a step of the connection's turn, its model is the client's, so it has a tool span and no chat span (the
  ``assistant/message`` advertising such a call, from the ``external`` model, is no reply of ours either);
- ``execute_tool {tool}``: one per call, ``tool/call`` to its ``tool/result`` (kind ``INTERNAL``), with
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type``; an ``isError`` result is status ``ERROR``
  with the result's text as its description and ``error.type`` ``tool_error``.

Chat and tool spans are children of their turn's span. Every span carries ``gen_ai.operation.name`` and
``gen_ai.conversation.id`` (the session id, the logs' ``session.id``); none carries content (prompts, replies, tool
arguments): the logs do, and the redact rules decide what of it leaves. Times are the events' own. A span still open
when its session's ``shutdown`` record arrives (or when the backend stops) ends then, status unset. What an
``open`` span cannot know (a turn begun by an earlier process) it does not invent: a step or a call with no turn span
known is a root of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry import context, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from dsh_todo.harness.telemetry.record import TelemetryRecord
from dsh_todo.harness.tool_results import answers
from dsh_todo.harness.turns import EXTERNAL_MODEL

OPERATION: Final = "gen_ai.operation.name"
PROVIDER: Final = "gen_ai.provider.name"
CONVERSATION: Final = "gen_ai.conversation.id"
REQUEST_MODEL: Final = "gen_ai.request.model"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
ERROR_TYPE: Final = "error.type"
TOOL_ERROR: Final = "tool_error"


@dataclass
class _Open:
    """One session's open spans, and its open step: a chat span is built whole once the step shows what it was."""

    turn: Span | None = None
    tools: dict[str, Span] = field(default_factory=dict)
    step_start: int | None = None
    """When the open step began (ns), until it is answered or ends."""
    step_called: bool = False

    def all(self) -> list[Span]:
        return [*self.tools.values(), *((self.turn,) if self.turn is not None else ())]


def _nanos(record: TelemetryRecord) -> int:
    return record.time * 1_000_000


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if hasattr(value, "keys") else {}


class GenAiSpans:
    """Turns ledger records into spans on ``tracer``; called on one thread (the backend's feeder), in log order."""

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._sessions: dict[str, _Open] = {}

    def observe(self, record: TelemetryRecord) -> None:
        session_id = str(record.attributes.get("session.id", ""))
        if record.channel == "ops":
            if record.attributes.get("telemetry.op") == "shutdown":
                self._end_all(self._sessions.pop(session_id, _Open()), _nanos(record))
            return
        kind = record.attributes.get("event.type")
        handler = _HANDLERS.get(str(kind))
        if handler is not None:
            handler(self, self._sessions.setdefault(session_id, _Open()), session_id, record, _mapping(record.body))

    def close(self, end_ns: int) -> None:
        """End every span still open (the backend is stopping)."""
        for spans in self._sessions.values():
            self._end_all(spans, end_ns)
        self._sessions.clear()

    # -- the events ---------------------------------------------------------------------------------------

    def _start(self, name: str, parent: Span | None, kind: Any, attributes: dict[str, Any], start: int) -> Span:
        where = trace.set_span_in_context(parent) if parent is not None else context.Context()
        return self._tracer.start_span(name, context=where, kind=kind, attributes=attributes, start_time=start)

    def _turn_start(self, spans: _Open, session_id: str, record: TelemetryRecord, _data: dict[str, Any]) -> None:
        self._end_all(spans, _nanos(record))  # a turn left open is over once another starts
        spans.turn = self._start("invoke_agent", None, SpanKind.INTERNAL,
                                 {OPERATION: "invoke_agent", CONVERSATION: session_id}, _nanos(record))

    def _step_start(self, spans: _Open, _session_id: str, record: TelemetryRecord, _data: dict[str, Any]) -> None:
        spans.step_start, spans.step_called = _nanos(record), False

    def _assistant(self, spans: _Open, session_id: str, record: TelemetryRecord, data: dict[str, Any]) -> None:
        start = spans.step_start
        if start is None:
            return
        spans.step_start = None  # one request per step
        source = _mapping(_mapping(data.get("message")).get("source"))
        if source == EXTERNAL_MODEL:  # a call of a model outside the harness, advertised: no request of ours
            return
        attributes: dict[str, Any] = {OPERATION: "chat", CONVERSATION: session_id}
        model, provider = source.get("model"), source.get("provider")
        if isinstance(model, str) and model:
            attributes[REQUEST_MODEL] = model
        if isinstance(provider, str) and provider:
            attributes[PROVIDER] = provider
            if spans.turn is not None:
                spans.turn.set_attribute(PROVIDER, provider)
        usage = _mapping(data.get("usage"))
        for key, attribute in (("inputTokens", INPUT_TOKENS), ("outputTokens", OUTPUT_TOKENS)):
            tokens = usage.get(key)
            if isinstance(tokens, int) and not isinstance(tokens, bool):
                attributes[attribute] = tokens
        name = f"chat {model}" if REQUEST_MODEL in attributes else "chat"
        self._start(name, spans.turn, SpanKind.CLIENT, attributes, start).end(end_time=_nanos(record))

    def _step_end(self, spans: _Open, session_id: str, record: TelemetryRecord, _data: dict[str, Any]) -> None:
        """A step that ends unanswered and without calls was a model request that failed (or was cut short)."""
        start, spans.step_start = spans.step_start, None
        if start is None or spans.step_called:
            return
        chat = self._start("chat", spans.turn, SpanKind.CLIENT, {OPERATION: "chat", CONVERSATION: session_id}, start)
        chat.set_status(Status(StatusCode.ERROR, "the model request ended without a reply"))
        chat.end(end_time=_nanos(record))

    def _tool_call(self, spans: _Open, session_id: str, record: TelemetryRecord, data: dict[str, Any]) -> None:
        spans.step_called = True
        call_id, name = data.get("callId"), data.get("name")
        if not isinstance(call_id, str):
            return
        tool = name if isinstance(name, str) else ""
        spans.tools[call_id] = self._start(
            f"execute_tool {tool}".rstrip(), spans.turn, SpanKind.INTERNAL,
            {OPERATION: "execute_tool", CONVERSATION: session_id, TOOL_NAME: tool, TOOL_CALL_ID: call_id,
             TOOL_TYPE: "function"}, _nanos(record))

    def _tool_result(self, spans: _Open, _session_id: str, record: TelemetryRecord, data: dict[str, Any]) -> None:
        found = answers(data.get("message"))
        span = spans.tools.pop(str(found[0].call_id), None) if found else None
        if span is None:
            return
        if found[0].is_error:
            span.set_attribute(ERROR_TYPE, TOOL_ERROR)
            span.set_status(Status(StatusCode.ERROR, _text(found[0].content)))
        span.end(end_time=_nanos(record))

    def _turn_end(self, spans: _Open, _session_id: str, record: TelemetryRecord, data: dict[str, Any]) -> None:
        turn = spans.turn
        reason = _mapping(data.get("reason"))
        if turn is not None and reason.get("kind") == "error":
            error = _mapping(reason.get("error"))
            turn.set_attribute(ERROR_TYPE, str(error.get("name") or "_OTHER"))
            turn.set_status(Status(StatusCode.ERROR, str(error.get("message") or "")))
        self._end_all(spans, _nanos(record))

    # -- ending ---------------------------------------------------------------------------------------------

    def _end_all(self, spans: _Open, end: int) -> None:
        for span in spans.all():
            span.end(end_time=end)
        spans.turn, spans.step_start, spans.step_called = None, None, False
        spans.tools.clear()


def _text(content: Any) -> str:
    """The text blocks of a tool result's content, joined: what the model was told went wrong."""
    if not isinstance(content, (list, tuple)):
        return ""
    return "\n".join(str(block.get("text", "")) for block in map(_mapping, content) if block.get("type") == "text")


_HANDLERS: Final = {
    "turn/start": GenAiSpans._turn_start,
    "step/start": GenAiSpans._step_start,
    "assistant/message": GenAiSpans._assistant,
    "step/end": GenAiSpans._step_end,
    "tool/call": GenAiSpans._tool_call,
    "tool/result": GenAiSpans._tool_result,
    "turn/end": GenAiSpans._turn_end,
}
