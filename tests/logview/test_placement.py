"""A log that is not where its header says is refused on its header alone, before the rest is read."""

from __future__ import annotations

from pathlib import Path

from dsh_todo.logview import read_plan, read_session
from tests.crafted import copied_elsewhere


def test_a_misplaced_copy_is_refused_before_its_events_are_read(tmp_path: Path) -> None:
    """Repro: a 1M-event log moved out of its directory layout was refused only after a full read (6 s, 1.2 GB).
    Here the copy's body is 1 GiB without a newline (a sparse file): a read of it would end in the line-length
    refusal, so the misplacement refusal proves the body was never read."""
    copy = copied_elsewhere(tmp_path)
    header = copy.read_bytes().split(b"\n", 1)[0] + b"\n"
    with copy.open("wb") as file:
        file.write(header)
        file.truncate(1 << 30)
    for view in (read_plan(copy), read_session(copy)):
        assert view.health.code == "corrupt-log"
        assert view.health.reason.startswith(f"{copy} is not where its header puts it"), view.health.reason
