"""Drives a CrewAI crew holding ``todo_write``, run by ``test_crewai.py`` inside a throwaway environment that has
crewai (which cannot be installed beside the suite's own packages), and prints what happened as one JSON object.

``python crewai_driver.py MODE ROOT SCENARIO``: ``MODE`` is ``run`` (the scenario through ``crew.kickoff()`` in
``kickoff_turn(todos)``), ``fail`` (the model raises after the first call), ``cancel`` (the task running
``crew.akickoff()`` is cancelled while the model is answering its second request) or ``cancel-in-call`` (cancelled
while the second call, an empty list, runs in CrewAI's worker thread; it is let go half a second later); the session
``s1`` is persisted under ``ROOT``;
``SCENARIO`` is JSON: ``{"raw": {call id: argument text}, "steps": [[call id, ...], ...], "final": text}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any

from crewai import Agent, Crew, Task
from crewai.llms.base_llm import BaseLLM
from pydantic import Field

from dsh_todo.adapters.crewai import TodoBinding, bind_todo, kickoff_turn, todo_write_tool


def plain(value: Any) -> Any:
    """A JSON copy of what the model was handed, as it was at that moment (CrewAI keeps editing its lists)."""
    return json.loads(json.dumps(value, default=repr))


class ScriptedLLM(BaseLLM):
    """CrewAI's model interface playing a script: each step's calls as native tool calls, then the final text; it
    records the tool schemas and the messages of every request."""

    raw: dict[str, str] = Field(default_factory=dict)
    steps: list[list[str]] = Field(default_factory=list)
    final: str = ""
    fail_after: int | None = None
    """Raise instead of answering from request number ``fail_after`` (0-based) on (CrewAI retries a failed agent
    run from its start, so one failure alone does not end the kickoff)."""
    hang_after: int | None = None
    """Block request number ``hang_after`` until :attr:`release` is set (``answering`` is set meanwhile)."""
    requests: list[dict[str, Any]] = Field(default_factory=list)
    answering: Any = Field(default_factory=threading.Event)
    release: Any = Field(default_factory=threading.Event)

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None) -> Any:
        index = len(self.requests)
        self.requests.append({"tools": plain(tools), "messages": plain(messages),
                              "available_functions": available_functions is not None})
        if self.fail_after is not None and index >= self.fail_after:
            raise RuntimeError("the model is down")
        if index == self.hang_after:
            self.answering.set()
            self.release.wait(60)
            raise RuntimeError("released")
        if self.steps:
            return [{"id": cid, "type": "function", "function": {"name": "todo_write", "arguments": self.raw[cid]}}
                    for cid in self.steps.pop(0)]
        return self.final

    def supports_function_calling(self) -> bool:
        return True


def crew_for(llm: ScriptedLLM, todos: TodoBinding) -> Crew:
    agent = Agent(role="planner", goal="Plan before you act.", backstory="A careful engineer.", llm=llm,
                  tools=[todo_write_tool(todos)])
    task = Task(description="Fix the bug", expected_output="A plan.", agent=agent)
    return Crew(agents=[agent], tasks=[task])


def hang_on_an_empty_list(todos: TodoBinding, started: threading.Event, release: threading.Event) -> None:
    """Make a call whose list is empty wait inside the tool, ``started`` set, until ``release`` is."""
    registry = todos.ctx.tools
    execute = registry.execute

    async def hanging(name: str, arguments: Any, *args: Any, **kwargs: Any) -> Any:
        if arguments == {"todos": []}:
            started.set()
            while not release.is_set():
                await asyncio.sleep(0.01)
        return await execute(name, arguments, *args, **kwargs)

    registry.execute = hanging


async def cancel_while(todos: TodoBinding, crew: Crew, started: threading.Event, report: dict[str, Any],
                       release: threading.Event | None = None) -> None:
    """Run ``crew.akickoff()`` as a turn in a task and cancel it once ``started`` is set; set ``release`` half a
    second later (CrewAI cannot stop the threads its model and tool calls run in: they end on their own)."""

    async def kickoff() -> None:
        async with kickoff_turn(todos):
            await crew.akickoff()

    task = asyncio.ensure_future(kickoff())
    while not started.is_set():
        await asyncio.sleep(0.01)
    task.cancel()
    if release is not None:
        threading.Timer(0.5, release.set).start()
    try:
        await task
    except asyncio.CancelledError:
        report["raised"] = "CancelledError"


def main(mode: str, root: str, scenario: dict[str, Any]) -> dict[str, Any]:
    llm = ScriptedLLM(model="scripted", raw=scenario["raw"], steps=scenario["steps"], final=scenario["final"])
    report: dict[str, Any] = {}
    with bind_todo(root=root, session="s1") as todos:
        crew = crew_for(llm, todos)
        if mode == "run":
            with kickoff_turn(todos):
                report["output"] = crew.kickoff().raw
        elif mode == "fail":
            llm.fail_after = 1
            try:
                with kickoff_turn(todos):
                    crew.kickoff()
            except Exception as exc:
                report["raised"] = f"{type(exc).__name__}: {exc}"
        elif mode == "cancel":
            llm.hang_after = 1
            asyncio.run(cancel_while(todos, crew, llm.answering, report, llm.release))
        elif mode == "cancel-in-call":
            started, release = threading.Event(), threading.Event()
            hang_on_an_empty_list(todos, started, release)
            asyncio.run(cancel_while(todos, crew, started, report, release))
        report["plan"] = todos.plan
    report["requests"] = llm.requests
    return report


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))))
