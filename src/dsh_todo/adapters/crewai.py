"""``todo_write`` for CrewAI (``pip install dsh-todo 'crewai>=1.15.30,<2'``: no extra can hold crewai, see
:data:`dsh_todo.extras.NO_EXTRA`).

:func:`todo_write_tool` gives a :class:`TodoWriteTool`, a CrewAI ``BaseTool`` for ``Agent(tools=[...])``, named
``todo_write`` with the native description. CrewAI builds the function schema it sends a model from the tool's
``args_schema``, a pydantic model, by calling its ``model_json_schema()``; ours is a model without fields whose
``model_json_schema()`` is the native parameters schema, so no pydantic-generated schema stands in for ours. CrewAI
then passes that schema through its own strict-mode pipeline before the model sees it: it closes every object with
``additionalProperties: false`` (the root object, which the contract leaves open, gets it as a last key; the items
already have it) and marks the function ``"strict": true``. Every other key, and the key order, are ours.

A model without fields matters for the calls too: ``BaseTool.run`` checks the model's arguments against
``args_schema`` only when it has fields, so the arguments CrewAI parsed from the model's JSON reach
:meth:`TodoBinding.call_value` untouched and the model reads the contract's own text for an accepted and a refused
call alike (returned as a plain string: CrewAI reads only a ``ToolFailure`` as a failure, and would reword one).
Arguments that are not JSON never reach a tool: CrewAI answers them itself (``Error: Failed to parse tool arguments
as JSON: ...``). CrewAI does not hand a tool the model's call id, so each call is logged under an id of ours.
CrewAI runs the calls of one model response in parallel threads; the binding writes them one at a time, in the
order they reach it.

CrewAI caches tool results by arguments and answers a repeated call from its cache without running the tool; the
tool's ``cache_function`` refuses every result, so each call reaches the log (in DSH a repeated list is a new
``todo/write``).

A kickoff is one DSH turn with ``with kickoff_turn(todos): crew.kickoff(...)`` (or ``async with`` around
``await crew.akickoff(...)``): closed ``completed``, ``error`` when the kickoff raised, ``aborted`` when it was
interrupted or its task cancelled. Why not ``todos.turn()``: CrewAI runs tools in worker threads, which neither a
cancelled task nor an interrupt stops. Any turn's end waits for the call running on another thread (see
:mod:`dsh_todo.adapters.common`), but a call CrewAI had started that still waits for the binding's lock would be
answered aborted; :class:`KickoffTurn` waits for every call CrewAI started before it closes a turn that did not
complete (they are short: the todo rules, under the binding's lock), so they all land inside it.
Calls outside any turn take turns as described in :mod:`dsh_todo.adapters.common`.

crewai is not in this project's development environment (every crewai release needs ``openai<3``, the dev group
pins openai 3): the adapter is tested in an environment of its own (``tests/adapters/test_crewai.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from weakref import WeakKeyDictionary

from dsh_todo.adapters.common import TodoBinding, TurnScope, bind_todo, standing_plan
from dsh_todo.extras import missing

try:
    from crewai.tools import BaseTool
    from pydantic import BaseModel, ConfigDict, Field
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("crewai") from exc

__all__ = ["KickoffTurn", "TodoBinding", "TodoWriteTool", "TurnScope", "bind_todo", "kickoff_turn", "standing_plan",
           "todo_write_tool"]

SETTLE_TIMEOUT_S = 30.0
"""How long a turn that did not complete waits for its calls still running in CrewAI's threads before it closes."""


class _Running:
    """The calls of one binding running right now, in whatever thread CrewAI runs them."""

    def __init__(self) -> None:
        self._idle = threading.Condition()
        self._count = 0

    @contextmanager
    def call(self) -> Iterator[None]:
        with self._idle:
            self._count += 1
        try:
            yield
        finally:
            with self._idle:
                self._count -= 1
                self._idle.notify_all()

    def settle(self, timeout: float) -> bool:
        """Wait until no call runs; whether that happened within ``timeout`` seconds."""
        with self._idle:
            return self._idle.wait_for(lambda: self._count == 0, timeout)


_RUNNING: WeakKeyDictionary[TodoBinding, _Running] = WeakKeyDictionary()
_RUNNING_LOCK = threading.Lock()


def _running(binding: TodoBinding) -> _Running:
    with _RUNNING_LOCK:
        return _RUNNING.setdefault(binding, _Running())


def _never_cache(_arguments: Any = None, _result: Any = None) -> bool:
    """CrewAI's ``cache_function``: no result is cached, so a repeated call runs (and is logged) again."""
    return False


def _arguments_model(binding: TodoBinding) -> type[BaseModel]:
    """An ``args_schema`` for ``binding``: no fields (CrewAI then validates nothing), the native JSON Schema."""

    class TodoWriteArguments(BaseModel):
        model_config = ConfigDict(extra="allow")

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            # A fresh dict each time: CrewAI's schema pipeline edits what it is given in place.
            return binding.parameters

    return TodoWriteArguments


class TodoWriteTool(BaseTool):  # type: ignore[misc]  # crewai is untyped here (not in the dev environment)
    """``todo_write`` bound to one session, as a CrewAI tool. Build it with :func:`todo_write_tool`."""

    binding: TodoBinding = Field(exclude=True)
    """Where the calls land; ``binding.plan`` is the standing plan."""

    def _run(self, **arguments: Any) -> str:
        with _running(self.binding).call():
            return self.binding.call_value_sync(arguments).text

    async def _arun(self, **arguments: Any) -> str:
        # Not counted as running: a coroutine is cancelled with its task, and waiting for one on its own event
        # loop would block it. (CrewAI's native tool calls take ``_run``, in a thread.)
        return (await self.binding.call_value(arguments)).text


def todo_write_tool(binding: TodoBinding) -> TodoWriteTool:
    """A CrewAI tool named ``todo_write`` whose calls land on ``binding``'s session."""
    return TodoWriteTool(binding=binding, name=binding.name, description=binding.description,
                         args_schema=_arguments_model(binding), cache_function=_never_cache)


class KickoffTurn(TurnScope):
    """One kickoff as one DSH turn of a binding's session (``with`` or ``async with``); build it with
    :func:`kickoff_turn`. A block that raised (an error, an interrupt, a cancellation) first waits, up to
    :data:`SETTLE_TIMEOUT_S`, for the binding's calls still running in CrewAI's threads, so they end inside the turn."""

    def __init__(self, binding: TodoBinding) -> None:
        super().__init__(binding.turns)
        self._running = _running(binding)

    def close(self, exc: BaseException | None = None) -> None:
        if exc is not None:
            self._running.settle(SETTLE_TIMEOUT_S)
        super().close(exc)


def kickoff_turn(binding: TodoBinding) -> KickoffTurn:
    """A scope that makes one ``crew.kickoff()`` / ``await crew.akickoff()`` one DSH turn of ``binding``'s session."""
    return KickoffTurn(binding)
