"""The library sets no collector policy: the process's garbage collector is its owner's (decision 0045).

Importing the library, booting a runtime, calling the tool, writing a log and reading it back (the reader, and the
command line called in-process with its ``argv``, as a test or an embedding application does) leave the collector's
thresholds, whether it is enabled and the frozen generation as they were. Only ``dsh-todo``'s own process
(``cli.main()`` without ``argv``) chooses, and decision 0045 holds the number that justifies its choice. Run in a
fresh interpreter, so that nothing this test process did before counts.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

_SCRIPT = """
import asyncio, contextlib, gc, io, sys
root, enabled = sys.argv[1], sys.argv[2] == "enabled"
gc.set_threshold(1234, 7, 3)
(gc.enable if enabled else gc.disable)()
before = (gc.get_threshold(), gc.isenabled(), gc.get_freeze_count())

from dsh_todo.cli import main
from dsh_todo.harness import Agent
from dsh_todo.logview import read_plan, read_session
from dsh_todo.standard import open_runtime

ctx = open_runtime(root)
session = ctx.sessions.create("s", cwd="/w")
agent = Agent("a", session)
todos = [{"content": f"step {i}", "status": "pending"} for i in range(10)]
for bad in (False, True):
    args = {"todos": [*todos[:9], {"content": "step 9", "status": "finished" if bad else "pending"}]}
    result = asyncio.run(ctx.tools.execute("todo_write", args, agent=agent))
    assert result.is_error == bad, result.text
ctx.session_persistence.flush()
ctx.dispose()
with contextlib.redirect_stdout(io.StringIO()) as out:
    assert main(["plan", "--json", "--root", root, "s"]) == 0
assert "step 9" in out.getvalue()
from pathlib import Path
logs = list(Path(root).rglob("session.*"))
assert logs and all(read_plan(log).plan and read_session(log).plan for log in logs)
print(before == (gc.get_threshold(), gc.isenabled(), gc.get_freeze_count()), before,
      (gc.get_threshold(), gc.isenabled(), gc.get_freeze_count()))
"""


@pytest.mark.parametrize("collector", ["enabled", "disabled"])
def test_using_the_library_leaves_the_collector_as_its_owner_set_it(tmp_path: Path, collector: str) -> None:
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path / "root"), collector], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "True", done.stdout
