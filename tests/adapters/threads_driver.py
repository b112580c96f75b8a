"""Drives ``todo_write`` through framework runtimes that run a tool call on a thread of their own, in a process of
its own (run by ``test_threads.py``, which bounds it in time and memory), and prints what each call's caller was told
as one JSON object ``{session id: {call id: text}}``. Every session is persisted under ``ROOT``.

``python -m tests.adapters.threads_driver MODE ROOT [ARG ...]``:

* ``adk-live ROOT N``: Google ADK's ``Runner.run_live`` with ``ToolThreadPoolConfig(max_workers=4)`` (each call of
  our tool on a pool thread, in an event loop of its own) and a scripted live connection whose one model turn holds
  ``N`` parallel ``todo_write`` calls, inside ``todos.turn()``; session ``live``.
* ``adk-live-cancel ROOT N``: the same, and the task consuming the live run is cancelled while the first call is in
  flight in its pool thread (that call is held there for a while); session ``live``.
* ``pydantic-ai-threads ROOT T`` / ``openai-agents-threads ROOT T``: ``T`` threads at once, each a framework's
  synchronous run (``Agent.run_sync``, ``Runner.run_sync``: an event loop per thread) on one binding, two calls each,
  the first call held a while; session ``threads``.
* ``langchain-cancel ROOT RUNS SEED``: ``RUNS`` times, a synchronous agent awaited from async code
  (``await RunnableLambda(agent).ainvoke(...)``, LangChain's executor thread) inside ``todos.turn()`` makes three
  calls with 10-item lists and is cancelled at a random moment once it runs; the agent's thread is let finish
  before the binding closes. Sessions ``run0`` … .
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import json
import random
import sys
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from dsh_todo.harness.tools.registry import ToolResult

THREAD_TIMEOUT_S = 20.0
"""How long the driver waits for a framework's worker thread to finish its calls (a hang fails, it does not stall)."""

Told = dict[str, str]


def ten_items(run: int, call: int) -> list[dict[str, str]]:
    """A 10-item list, different for every call, one item in progress."""
    return [{"content": f"run {run} call {call} item {item}",
             "status": "completed" if item < call else "in_progress" if item == call else "pending"}
            for item in range(10)]


def record_answers(todos: Any, told: Told) -> threading.Event:
    """Record what every call of ``todos`` returned to its caller (by call id, from whatever thread); the event is set
    once a call is running."""
    running = threading.Event()
    lock = threading.Lock()

    def recording(method: Any) -> Any:
        async def recorded(arguments: Any, *, call_id: str | None = None) -> ToolResult:
            running.set()
            result: ToolResult = await method(arguments, call_id=call_id)
            with lock:
                told[str(call_id)] = result.text
            return result
        return recorded

    todos.call = recording(todos.call)
    todos.call_value = recording(todos.call_value)
    return running


def hold_first_call(todos: Any, seconds: float) -> threading.Event:
    """Hold the first call that reaches the tool for ``seconds``, blocking its thread (a slow tool on a pool thread);
    the event is set when it is held."""
    held = threading.Event()
    registry = todos.ctx.tools
    execute = registry.execute

    async def slow(name: str, arguments: Any, *args: Any, **kwargs: Any) -> Any:
        if not held.is_set():
            held.set()
            time.sleep(seconds)
        return await execute(name, arguments, *args, **kwargs)

    registry.execute = slow
    return held


# Google ADK, live ----------------------------------------------------------------------------------------------

def adk_live(root: str, calls: int, cancel: bool) -> dict[str, Told]:
    from google.adk.agents import LlmAgent
    from google.adk.agents.live_request_queue import LiveRequestQueue
    from google.adk.agents.run_config import RunConfig, ToolThreadPoolConfig
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.base_llm_connection import BaseLlmConnection
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    from dsh_todo.adapters.google_adk import bind_todo, todo_write_tool

    class Connection(BaseLlmConnection):
        """One model turn with ``calls`` parallel calls; once every call is answered, the turn completes."""

        def __init__(self) -> None:
            self.answers: asyncio.Queue[str] = asyncio.Queue()

        async def send_history(self, history: list[types.Content]) -> None:
            pass

        async def send_content(self, content: types.Content) -> None:
            for part in content.parts or []:
                if part.function_response is not None:
                    await self.answers.put(str(part.function_response.id))

        async def send_realtime(self, blob: Any) -> None:
            pass

        async def receive(self) -> AsyncGenerator[LlmResponse, None]:
            parts = [types.Part(function_call=types.FunctionCall(id=f"c{index}", name="todo_write",
                                                                 args={"todos": ten_items(0, index)}))
                     for index in range(calls)]
            yield LlmResponse(content=types.Content(role="model", parts=parts))
            for _ in range(calls):
                await self.answers.get()
            yield LlmResponse(turn_complete=True)
            await asyncio.Event().wait()  # a live connection stays open until the run is stopped

        async def close(self) -> None:
            pass

    class LiveLlm(BaseLlm):
        model: str = "scripted-live"

        async def generate_content_async(self, llm_request: LlmRequest,
                                         stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
            raise NotImplementedError("live only")
            yield  # pragma: no cover

        @contextlib.asynccontextmanager
        async def connect(self, llm_request: LlmRequest) -> AsyncIterator[BaseLlmConnection]:
            yield Connection()

    told: Told = {}

    async def main() -> None:
        with bind_todo(root=root, session="live", cwd=root) as todos:
            running = record_answers(todos, told)
            held = hold_first_call(todos, 0.5) if cancel else None
            agent = LlmAgent(name="planner", model=LiveLlm(), instruction="Plan.", tools=[todo_write_tool(todos)])
            runner = InMemoryRunner(agent=agent, app_name="threads")
            session = await runner.session_service.create_session(app_name="threads", user_id="u")
            queue = LiveRequestQueue()
            queue.send_content(types.Content(role="user", parts=[types.Part(text="Plan the fix")]))
            config = RunConfig(tool_thread_pool_config=ToolThreadPoolConfig(max_workers=4))

            async def consume() -> None:
                async with todos.turn():
                    async for event in runner.run_live(user_id="u", session_id=session.id,
                                                       live_request_queue=queue, run_config=config):
                        if event.turn_complete:
                            return

            task = asyncio.ensure_future(consume())
            if held is not None:
                await asyncio.to_thread(held.wait, THREAD_TIMEOUT_S)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            else:
                await asyncio.wait_for(task, THREAD_TIMEOUT_S)
            assert running.is_set()
            queue.close()
            await runner.close()
            # The pool threads may still be finishing calls the cancelled run left: let them, then close.
            deadline = time.monotonic() + THREAD_TIMEOUT_S
            while cancel and len(told) < calls and time.monotonic() < deadline:
                await asyncio.sleep(0.05)

    asyncio.run(main())
    return {"live": told}


# LangChain, a synchronous agent on LangChain's executor thread -----------------------------------------------

def langchain_cancel(root: str, runs: int, seed: int) -> dict[str, Told]:
    from langchain_core.runnables import RunnableLambda

    from dsh_todo.adapters.langchain import bind_todo, todo_write_tool

    rng = random.Random(seed)
    answers: dict[str, Told] = {}

    async def one(run: int) -> None:
        told: Told = {}
        started, done = threading.Event(), threading.Event()
        with bind_todo(root=root, session=f"run{run}", cwd=root) as todos:
            tool = todo_write_tool(todos)

            def agent(_input: Any) -> str:
                started.set()
                try:
                    for call in range(3):
                        call_id = f"r{run}c{call}"
                        answer = tool.invoke({"type": "tool_call", "id": call_id, "name": "todo_write",
                                              "args": {"todos": ten_items(run, call)}})
                        told[call_id] = answer.content
                    return "done"
                finally:
                    done.set()

            async def turn() -> None:
                async with todos.turn():
                    await RunnableLambda(agent).ainvoke("Plan the fix")

            task = asyncio.ensure_future(turn())
            # Once the agent runs on its thread (a task cancelled before LangChain hands it over never runs it).
            if not await asyncio.to_thread(started.wait, THREAD_TIMEOUT_S):
                raise RuntimeError(f"run {run}: the agent never started")
            await asyncio.sleep(rng.uniform(0, 0.01))
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if not await asyncio.to_thread(done.wait, THREAD_TIMEOUT_S):
                faulthandler.dump_traceback(all_threads=True)
                raise RuntimeError(f"run {run}: the agent's thread did not finish")
        answers[f"run{run}"] = told

    async def main() -> None:
        for run in range(runs):
            await one(run)

    asyncio.run(main())
    return answers


# Sync runs on several threads, one binding: each thread runs its own event loop -------------------------------

def sync_runs_on_threads(framework: str, root: str, threads: int) -> dict[str, Told]:
    """``threads`` threads at once, each a framework's sync run (``run_sync``: an event loop of its own) of two
    steps with one 10-item call each, on one binding (the bare tool: the calls share the standing turn); the first
    call is held a while so the others wait for it."""
    told: Told = {}
    start = threading.Barrier(threads, timeout=THREAD_TIMEOUT_S)
    errors: list[BaseException] = []

    def steps(run: int) -> list[tuple[str, str]]:
        return [(f"t{run}c{call}", json.dumps({"todos": ten_items(run, call)})) for call in range(2)]

    if framework == "pydantic-ai":
        from pydantic_ai import Agent as PydanticAgent
        from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel

        from dsh_todo.adapters.pydantic_ai import todo_write_toolset

        def run_one(todos: Any, run: int) -> None:
            script = steps(run)

            def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
                if len(script) == 2:
                    start.wait()
                if script:
                    call_id, raw = script.pop(0)
                    return ModelResponse(parts=[ToolCallPart("todo_write", raw, tool_call_id=call_id)])
                return ModelResponse(parts=[TextPart("done")])

            PydanticAgent(FunctionModel(model), toolsets=[todo_write_toolset(todos)]).run_sync("Plan the fix")
    elif framework == "openai-agents":
        from agents import Agent as OpenAIAgent
        from agents import RunConfig, Runner
        from agents.testing import ScriptedModel, assistant_message, function_call

        from dsh_todo.adapters.openai_agents import todo_write_tool

        def run_one(todos: Any, run: int) -> None:
            script: list[Any] = [[function_call("todo_write", raw, call_id=cid)] for cid, raw in steps(run)]
            agent = OpenAIAgent(name="planner", model=ScriptedModel([*script, [assistant_message("done")]]),
                                tools=[todo_write_tool(todos)])
            start.wait()
            Runner.run_sync(agent, "Plan the fix", run_config=RunConfig(tracing_disabled=True))
    else:
        raise SystemExit(f"unknown framework: {framework}")

    from dsh_todo.adapters.common import bind_todo

    with bind_todo(root=root, session="threads", cwd=root) as todos:
        record_answers(todos, told)
        hold_first_call(todos, 0.3)

        def guarded(run: int) -> None:
            try:
                run_one(todos, run)
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=guarded, args=(run,), daemon=True) for run in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(THREAD_TIMEOUT_S)
        if any(worker.is_alive() for worker in workers):
            faulthandler.dump_traceback(all_threads=True)
            raise RuntimeError("a run did not finish (a hang)")
        if errors:
            raise errors[0]
    return {"threads": told}


def main(argv: list[str]) -> int:
    mode, root, *rest = argv
    if mode in ("adk-live", "adk-live-cancel"):
        told = adk_live(root, int(rest[0]), cancel=mode == "adk-live-cancel")
    elif mode in ("pydantic-ai-threads", "openai-agents-threads"):
        told = sync_runs_on_threads(mode.removesuffix("-threads"), root, int(rest[0]))
    elif mode == "langchain-cancel":
        told = langchain_cancel(root, int(rest[0]), int(rest[1]))
    else:
        raise SystemExit(f"unknown mode: {mode}")
    print(json.dumps(told))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
