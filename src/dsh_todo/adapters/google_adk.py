"""``todo_write`` for Google's Agent Development Kit (``pip install 'dsh-todo[google-adk]'``).

:func:`todo_write_tool` gives a :class:`TodoWriteTool`, an ADK ``BaseTool`` for ``LlmAgent(tools=[...])``. Its
declaration is built by hand rather than from a Python signature (what ``FunctionTool`` would do), so the model is
sent our exact name, description and parameters schema: the schema travels as ``parameters_json_schema``, a plain
JSON Schema dict ADK passes on untouched, instead of ``parameters``, which would be converted to Gemini's own
``Schema`` type and lose the key order and the keywords that type lacks.

ADK hands a tool the model's arguments already parsed into a dict (its model layers parse the text), so they go to
:meth:`TodoBinding.call_value` and are logged as compact JSON; a model whose text is not JSON never reaches a tool.
The answer is the registry's text, returned as it is for an accepted call and for a refused one alike. ADK wraps a
non-dict result as ``{"result": text}``, the one shape all its model layers know: Gemini receives it as the
function's response, ADK's Anthropic layer unwraps it to the bare text, its LiteLLM and OpenAI layers send it as
that JSON. An ``{"error": text}`` dict of our own would reach the Anthropic layer as JSON instead of the text.

:func:`run_turn` runs one ``Runner`` invocation as one DSH turn: it yields ``runner.run_async(...)``'s events and
closes the turn ``completed``, ``error`` when the run raised, or ``aborted`` when it was stopped: its task
cancelled, its consumer closing it early, or ADK's own ``abort_signal`` set (ADK then ends the run normally, with
an abort event, so a plain ``async with todos.turn():`` around it would say ``completed``). Why not an ADK plugin:
``after_run_callback`` and ``on_run_error_callback`` are both skipped when the task is cancelled, so a turn opened
by a plugin could be left open. Calls outside any turn take turns as described in :mod:`dsh_todo.adapters.common`.

Live mode (``runner.run_live``, inside ``async with todos.turn():``) calls the tool on the run's loop, unless
``RunConfig(tool_thread_pool_config=ToolThreadPoolConfig())`` is set: ADK then runs each call of a tool like ours on
a pool thread, in an event loop of its own (``asyncio.run`` per call), and the model's parallel calls at once. The
binding's call lock works across threads and loops, so they are written one at a time; when the run is cancelled,
its turn's end waits for the call running on its thread (it ends inside the turn with its real answer) and the
run's calls still waiting behind it are answered ``Error: tool call aborted`` without being logged.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from dsh_todo.adapters.common import TodoBinding, TurnScope, bind_todo, standing_plan
from dsh_todo.extras import missing
from dsh_todo.harness.turns import aborted

try:
    from google.adk.events.event import Event
    from google.adk.runners import Runner
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("google-adk") from exc

__all__ = ["TodoBinding", "TodoWriteTool", "TurnScope", "bind_todo", "run_turn", "standing_plan", "todo_write_tool"]


class TodoWriteTool(BaseTool):
    """``todo_write`` bound to one session, as an ADK tool. Build it with :func:`todo_write_tool`."""

    def __init__(self, binding: TodoBinding) -> None:
        super().__init__(name=binding.name, description=binding.description)
        self.binding = binding
        """Where the calls land; ``binding.plan`` is the standing plan."""

    def _get_declaration(self) -> types.FunctionDeclaration:
        # A fresh schema for every request: ADK and its model layers may edit what they are given.
        return types.FunctionDeclaration(name=self.name, description=self.description,
                                         parameters_json_schema=self.binding.parameters)

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> str:
        # The model's call id becomes the ``tool/call`` callId in our log.
        result = await self.binding.call_value(args, call_id=tool_context.function_call_id)
        return result.text


def todo_write_tool(binding: TodoBinding) -> TodoWriteTool:
    """An ADK tool named ``todo_write`` whose calls land on ``binding``'s session."""
    return TodoWriteTool(binding)


async def run_turn(binding: TodoBinding, runner: Runner, **run_async: Any) -> AsyncGenerator[Event, None]:
    """``runner.run_async(**run_async)`` as one DSH turn of ``binding``'s session, yielding ADK's events.

    Inside a turn that is already open (``todos.turn()``, a host's) the invocation joins it instead, as every scope
    does; two invocations at once on one binding so share a turn, their calls written one at a time.
    """
    signal = run_async.get("abort_signal")
    scope = binding.turn()
    scope.open()
    failure: BaseException | None = None
    try:
        async with aclosing(runner.run_async(**run_async)) as events:
            async for event in events:
                yield event
        if isinstance(signal, asyncio.Event) and signal.is_set():
            scope.reason = aborted()  # ADK ended the run early, with an abort event instead of an exception
    except GeneratorExit:
        scope.reason = aborted()  # the consumer stopped iterating: the run was given up, not finished
        raise
    except BaseException as exc:
        failure = exc
        raise
    finally:
        scope.close(failure)
