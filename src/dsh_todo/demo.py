"""``dsh-todo demo``: a realistic multi-step task played offline by a scripted model through the real agent loop.

Everything but the model is real: the composition boots the same plugins a deployment would, every call goes through
the tool registry's validation, and the plan shown is the ``todos`` projection of the session log. The script
includes parallel ``in_progress`` work, a rejected call and its correction, completion, and a second turn whose
``turn/start`` clears the standing plan.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from dsh_todo.harness import Agent, Context, boot
from dsh_todo.harness.agent_loop import AgentLoop
from dsh_todo.harness.llm import ModelReply, ScriptedModel, ToolCallRequest
from dsh_todo.harness.session import Event, Session
from dsh_todo.jsonutil import dumps

INSPECT, DESIGN, BUILD, DOCS, TESTS = (
    "Read the request pipeline", "Choose a limiter design", "Implement the rate limiter",
    "Document the limits", "Run the test suite")


def _todo_call(n: int, *items: tuple[str, str]) -> ToolCallRequest:
    args = dumps({"todos": [{"content": c, "status": s} for c, s in items]})
    return ToolCallRequest(f"call_{n:02d}_demo", "todo_write", args)


def demo_script() -> tuple[list[tuple[str, int]], list[ModelReply]]:
    """The prompts (with how many replies each consumes) and the scripted replies."""
    p, a, d = "pending", "in_progress", "completed"
    replies = [
        ModelReply("I'll plan the work first.", [_todo_call(
            1, (INSPECT, a), (DESIGN, p), (BUILD, p), (DOCS, p), (TESTS, p))], "tool_calls"),
        ModelReply("The pipeline has one middleware hook; a token bucket per key fits.", [_todo_call(
            2, (INSPECT, d), (DESIGN, d), (BUILD, a), (DOCS, p), (TESTS, p))], "tool_calls"),
        ModelReply("A subagent can write the docs while I implement.", [_todo_call(
            3, (INSPECT, d), (DESIGN, d), (BUILD, a), (DOCS, a), (DOCS + " ", p), (TESTS, p))], "tool_calls"),
        ModelReply("", [_todo_call(
            4, (INSPECT, d), (DESIGN, d), (BUILD, a), (DOCS, a), (TESTS, p))], "tool_calls"),
        ModelReply("Limiter and docs are done; running the tests.", [_todo_call(
            5, (INSPECT, d), (DESIGN, d), (BUILD, d), (DOCS, d), (TESTS, a))], "tool_calls"),
        ModelReply("", [_todo_call(6, (INSPECT, d), (DESIGN, d), (BUILD, d), (DOCS, d), (TESTS, d))],
                   "tool_calls"),
        ModelReply("Rate limiting is in place (token bucket, 100 requests/min per key), documented and tested."),
        ModelReply("Next I would add per-route overrides; say the word and I will plan it."),
    ]
    prompts = [("Add rate limiting to the public API and document it.", 7), ("Thanks! What's next?", 1)]
    return prompts, replies


COMPOSITION: list[dict[str, Any]] = [
    {"id": "tools", "name": "@deepseek-ai/dsh-tools"},
    {"id": "session", "name": "@deepseek-ai/dsh-session"},
    {"id": "projections", "name": "@deepseek-ai/dsh-session-projection"},
    {"id": "tool-todo", "name": "@deepseek-ai/dsh-tool-todo", "config": {"allowParallelInProgress": True}},
]


class PlanPrinter:
    """Prints tool results and the standing plan as events arrive: a checklist on a terminal, deltas elsewhere."""

    def __init__(self, ctx: Context, out: Any = None) -> None:
        from dsh_todo.carriers.terminal import plan_delta, plan_lines

        self.out = out or sys.stdout
        self.interactive = bool(getattr(self.out, "isatty", lambda: False)())
        self._lines, self._delta = plan_lines, plan_delta
        ctx.sessions.listen(self._on_event)
        ctx.session_projections.on_change(self._on_plan)

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _on_event(self, _session: Session, event: Event) -> None:
        kind, data = event["type"], event["data"]
        if kind == "turn/start":
            self.say(f"-- turn {data['turn']} --")
        elif kind == "user/message":
            self.say(f"user> {data['content'][0]['text']}")
        elif kind == "assistant/message":
            for block in data["message"]["content"]:
                if block["type"] == "text":
                    self.say(f"model> {block['text']}")
        elif kind == "tool/result":
            block = data["message"]["content"][0]
            self.say(f"  {'!!' if block['isError'] else 'ok'} todo_write -> {block['content'][0]['text']}")

    def _on_plan(self, _session: Session, key: str, value: Any, seq: int) -> None:
        if key != "todos":
            return
        if self.interactive:
            for line in self._lines(value):
                self.say(f"  | {line}")
        else:
            self.say(f"  {self._delta(value)} (seq {seq})")


async def play(ctx: Context, session: Session, printer: PlanPrinter | None = None) -> None:
    prompts, replies = demo_script()
    model = ScriptedModel(replies, model="demo-script")
    loop = AgentLoop(ctx.tools, model)
    agent = Agent("demo", session)
    for prompt, _ in prompts:
        outcome = await loop.run_turn(agent, prompt)
        if printer is not None:
            printer.say(f"-- turn {outcome.turn} ended: {outcome.reason['kind']} --")


def run_demo(args: argparse.Namespace) -> int:
    ctx = boot(COMPOSITION)
    printer = PlanPrinter(ctx)
    printer.say("dsh-todo demo: the model is SCRIPTED (offline); the loop, tool, log and projection are real.")
    session = ctx.sessions.create("demo")
    asyncio.run(play(ctx, session, printer))
    plan = ctx.session_projections.snapshot(session)["values"]["todos"]
    printer.say(f"standing plan after the last turn: {dumps(plan)}")
    ctx.dispose()
    return 0
