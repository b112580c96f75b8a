"""Drives a CrewAI crew holding ``todo_write``, run by ``test_crewai.py`` inside a throwaway environment that has
crewai (which cannot be installed beside the suite's own packages), and prints what happened as one JSON object.

``python crewai_driver.py MODE ROOT SCENARIO``: ``MODE`` is ``run`` (the scenario through ``crew.kickoff()`` in
``todos.turn()``), ``fail`` (the model raises after the first call) or ``cancel`` (the task running
``crew.akickoff()`` is cancelled while the model is answering); the session ``s1`` is persisted under ``ROOT``;
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

from dsh_todo.adapters.crewai import TodoBinding, bind_todo, todo_write_tool


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


def main(mode: str, root: str, scenario: dict[str, Any]) -> dict[str, Any]:
    llm = ScriptedLLM(model="scripted", raw=scenario["raw"], steps=scenario["steps"], final=scenario["final"])
    report: dict[str, Any] = {}
    with bind_todo(root=root, session="s1") as todos:
        crew = crew_for(llm, todos)
        if mode == "run":
            with todos.turn():
                report["output"] = crew.kickoff().raw
        elif mode == "fail":
            llm.fail_after = 1
            try:
                with todos.turn():
                    crew.kickoff()
            except Exception as exc:
                report["raised"] = f"{type(exc).__name__}: {exc}"
        elif mode == "cancel":
            llm.hang_after = 1

            async def kickoff() -> None:
                async with todos.turn():
                    await crew.akickoff()

            async def cancel() -> None:
                task = asyncio.ensure_future(kickoff())
                while not llm.answering.is_set():
                    await asyncio.sleep(0.01)
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    report["raised"] = "CancelledError"
                finally:
                    llm.release.set()

            asyncio.run(cancel())
        report["plan"] = todos.plan
    report["requests"] = llm.requests
    return report


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))))
