"""Our full ``todo_write`` call against the Python peers' todo tools on the same 10-item list, on every path a call
takes: the list resent (the items we remember), every item new to the call (a first or rewritten plan: nothing we
remember applies), and one invalid ``status`` (a refusal).

The peers are installed on demand into throwaway virtual environments (``uv venv`` + ``uv pip install`` in a
temporary directory, removed afterwards unless ``--keep DIR``), never into the project's: they are not test
dependencies. This project is installed beside each peer, so each comparison runs in one process on one
interpreter, ours and the peer's batches interleaved, in CPU time.

- LangChain's ``write_todos`` (``langchain.agents.middleware.todo``): the tool invoked with a tool call, as its
  agent's tool node does (pydantic validation, ``Command`` with a ``ToolMessage``); any Python 3.11+.
- OpenHands' ``task_tracker``: arguments → ``TaskTrackerAction`` → the executor (in memory) → the observation's
  LLM content, the path its agent takes for a call; needs Python 3.12+.
- Kimi CLI's ``SetTodoList``: ``tool.call(arguments)`` (pydantic validation, then the tool), with the session's
  state kept in memory (``save_state`` does nothing); needs Python 3.12+.

Ours is ``ctx.tools.execute("todo_write", …)`` with the projection registry mounted, each batch on a fresh session
(the peers hold only their latest list). On the *new* path every call of every batch, ours and the peer's, gets a
list whose contents were never sent before (built before the batch's clock starts). Each path's row compares us with
the fastest peer on that path (goal: at most 0.5x it). Usage: ``uv run python benchmarks/peers.py [--quick] [--keep DIR]
[--python PATH]``. A peer that cannot be installed is reported as such and the others are still measured.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Peer:
    key: str
    label: str
    requirement: str
    needs: tuple[int, int]


PEERS = (
    Peer("langchain", "LangChain write_todos", "langchain==1.5.0", (3, 11)),
    Peer("openhands", "OpenHands task_tracker (args -> content)", "openhands-tools==1.58.2", (3, 12)),
    Peer("kimi", "Kimi CLI SetTodoList (in memory)", "kimi-cli==1.52.0", (3, 12)),
)

PATHS = (("valid, items resent", ""), ("valid, every item new", "_new"), ("invalid status", "_error"))
"""Each path's label and the suffix of its figures in the driver's output."""
LABELS = {peer.key: peer.label for peer in PEERS}

DRIVER = r'''
import asyncio, gc, json, logging, statistics, sys, time, types

logging.disable(logging.CRITICAL)
peer, samples, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
CONTENTS = [f"  step {i}: do the thing number {i}  " for i in range(10)]
STATUSES = [("completed", "in_progress", "pending")[i % 3] for i in range(10)]
INVALID = "finished"


def items(key, names, bad, contents=CONTENTS):
    out = [{key: c, "status": names[s]} for c, s in zip(contents, STATUSES)]
    if bad:
        out[-1]["status"] = INVALID
    return out


fresh = [0]


def new_contents(calls):
    """``calls`` lists of contents never sent before in this process."""
    fresh[0] += 1
    return [[f"  call {fresh[0]}-{n}, step {i}: do the thing  " for i in range(10)] for n in range(calls)]


SAME = {"pending": "pending", "in_progress": "in_progress", "completed": "completed"}
DONE = {"pending": "pending", "in_progress": "in_progress", "completed": "done"}
TODO = {"pending": "todo", "in_progress": "in_progress", "completed": "done"}

from dsh_todo.harness import Agent, boot

ctx = boot([
    {"id": "tools", "name": "@deepseek-ai/dsh-tools"},
    {"id": "session", "name": "@deepseek-ai/dsh-session"},
    {"id": "projections", "name": "@deepseek-ai/dsh-session-projection"},
    {"id": "tool-todo", "name": "@deepseek-ai/dsh-tool-todo", "config": {"allowParallelInProgress": True}},
])
counter = [0]


async def ours(bad, new=False):
    counter[0] += 1
    session = ctx.sessions.create(f"bench-{counter[0]}")
    agent, execute = Agent("bench", session), ctx.tools.execute
    if new:
        lists = [{"todos": items("content", SAME, False, contents)} for contents in new_contents(batch)]
    else:
        lists = [{"todos": items("content", SAME, bad)}] * batch
    start = time.process_time()
    for args in lists:
        result = await execute("todo_write", args, agent=agent)
        text = result.text
    elapsed = time.process_time() - start
    assert result.is_error == bad, text
    ctx.sessions.close(session.id)
    return elapsed


if peer == "langchain":
    from langchain.agents.middleware.todo import write_todos

    def call(args):
        try:
            return write_todos.invoke({"type": "tool_call", "id": "call-1", "name": "write_todos", "args": args})
        except Exception as exc:  # its tool node turns a validation error into the call's error message
            return str(exc)

    make = lambda bad, contents=CONTENTS: {"todos": items("content", SAME, bad, contents)}
    is_async = False
elif peer == "openhands":
    from openhands.tools.task_tracker.definition import TaskTrackerAction, TaskTrackerExecutor

    executor = TaskTrackerExecutor(save_dir=None)

    def call(args):
        try:
            return executor(TaskTrackerAction.model_validate(args)).to_llm_content
        except Exception as exc:  # its agent turns a validation error into an error observation
            return str(exc)

    make = lambda bad, contents=CONTENTS: {"command": "plan", "task_list": items("title", TODO, bad, contents)}
    is_async = False
else:
    from kimi_cli.tools.todo import SetTodoList

    state = types.SimpleNamespace(todos=[])
    runtime = types.SimpleNamespace(role="root", session=types.SimpleNamespace(state=state, save_state=lambda: None))
    tool = SetTodoList(runtime)

    async def call(args):
        return (await tool.call(args)).output

    make = lambda bad, contents=CONTENTS: {"todos": items("title", DONE, bad, contents)}
    is_async = True


async def theirs(bad, new=False):
    lists = [make(False, contents) for contents in new_contents(batch)] if new else [make(bad)] * batch
    start = time.process_time()
    if is_async:
        for args in lists:
            await call(args)
    else:
        for args in lists:
            call(args)
    return time.process_time() - start


async def main():
    times = {"ours": [], "ours_new": [], "ours_error": [], "peer": [], "peer_new": [], "peer_error": []}
    for _ in range(3):  # warm-up
        await ours(False), await theirs(False), await ours(True), await theirs(True)
        await ours(False, True), await theirs(False, True)
    for _ in range(samples):
        times["ours"].append(await ours(False))
        times["peer"].append(await theirs(False))
        times["ours_new"].append(await ours(False, True))
        times["peer_new"].append(await theirs(False, True))
        times["ours_error"].append(await ours(True))
        times["peer_error"].append(await theirs(True))
    print(json.dumps({k: statistics.median(v) / batch * 1e6 for k, v in times.items()}))


asyncio.run(main())
'''


def _runs(python: str) -> tuple[int, int] | None:
    """The version of a Python that actually starts (a pyenv shim for a version not selected does not)."""
    try:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                             text=True, timeout=30, check=True).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return int(out[0]), int(out[1])


def find_python(needs: tuple[int, int], given: str | None) -> str | None:
    """A Python of at least ``needs`` on this machine: ``--python``, then uv's finder, PATH, pyenv's versions."""
    candidates: list[str] = [given] if given else []
    uv = shutil.which("uv")
    for version in ("3.13", "3.12"):
        if uv:
            found = subprocess.run([uv, "python", "find", version], capture_output=True, text=True)
            if found.returncode == 0:
                candidates.append(found.stdout.strip())
        on_path = shutil.which(f"python{version}")
        if on_path:
            candidates.append(on_path)
    pyenv = shutil.which("pyenv")
    if pyenv:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
        candidates += sorted(str(p) for p in Path(root, "versions").glob("3.1[2-9]*/bin/python3"))
    candidates.append(sys.executable)
    for candidate in candidates:
        version = _runs(candidate)
        if version is not None and version >= needs:
            return candidate
    return None


def install(peer: Peer, python: str, where: Path) -> tuple[Path | None, str]:
    """An environment holding the peer and this project as it is now; (its python, "") or (None, why not).

    A kept environment (``--keep``) is reused, with this project reinstalled so the figures are of this tree.
    """
    env = where / peer.key
    uv = shutil.which("uv") or "uv"
    target = str(env / "bin" / "python")
    steps = [[uv, "pip", "install", "--no-config", "-q", "-p", target, peer.requirement, str(PROJECT),
              "--reinstall-package", "dsh-todo"]]  # --no-config: the peer's own resolution, not our pins
    if not (env / "bin" / "python").exists():
        steps.insert(0, [uv, "venv", "--no-config", "-q", "-p", python, str(env)])
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, cwd=where,
                              env={**os.environ, "VIRTUAL_ENV": str(env)})
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            return None, lines[-1] if lines else f"exit {done.returncode}"
    return env / "bin" / "python", ""


def measure(python: Path, peer: Peer, samples: int, batch: int, where: Path) -> dict[str, float]:
    driver = where / "driver.py"
    driver.write_text(DRIVER)
    done = subprocess.run([str(python), str(driver), peer.key, str(samples), str(batch)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "driver failed")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    args = sys.argv[1:]
    quick = "--quick" in args
    keep = Path(args[args.index("--keep") + 1]) if "--keep" in args else None
    given = args[args.index("--python") + 1] if "--python" in args else None
    samples, batch, rounds = (15, 100, 1) if quick else (31, 200, 3)
    where = keep or Path(tempfile.mkdtemp(prefix="dsh-todo-peers-"))
    where.mkdir(parents=True, exist_ok=True)
    try:
        envs: dict[str, Path] = {}
        for peer in PEERS:
            python = find_python(peer.needs, given)
            if python is None:
                print(f"{peer.label}: not measured, no Python {peer.needs[0]}.{peer.needs[1]}+ on this machine")
                continue
            env_python, why = install(peer, python, where)
            if env_python is None:
                print(f"{peer.label}: not measured, {peer.requirement} could not be installed: {why}")
                continue
            envs[peer.key] = env_python
        results: dict[str, list[dict[str, float]]] = {key: [] for key in envs}
        for _ in range(rounds):  # rounds interleave the peers too, so a busy minute does not land on one of them
            for peer in PEERS:
                if peer.key in envs:
                    results[peer.key].append(measure(envs[peer.key], peer, samples, batch, where))
        medians: dict[str, dict[str, float]] = {}
        for peer in PEERS:
            if peer.key not in results:
                continue
            runs = results[peer.key]
            median = {k: sorted(run[k] for run in runs)[len(runs) // 2] for k in runs[0]}
            medians[peer.key] = median
            version = _runs(str(envs[peer.key]))
            assert version is not None
            print(f"{peer.label} [{peer.requirement}, Python {version[0]}.{version[1]}]: "
                  + "; ".join(f"{label} {median['peer' + suffix]:.1f} us vs ours {median['ours' + suffix]:.1f} us "
                              f"(ours/theirs {median['ours' + suffix] / median['peer' + suffix]:.2f})"
                              for label, suffix in PATHS))
        for label, suffix in PATHS:
            if not medians:
                break
            key = min(medians, key=lambda k: medians[k]["peer" + suffix])
            theirs, ours = medians[key]["peer" + suffix], medians[key]["ours" + suffix]
            print(f"{label}: fastest peer {LABELS[key]}, {theirs:.1f} us; ours {ours:.1f} us = {ours / theirs:.2f}x "
                  f"it (goal <= 0.5x)")
    finally:
        if keep is None:
            shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
