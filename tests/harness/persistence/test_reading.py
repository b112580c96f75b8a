"""The plaintext seek a checkpoint's reader uses inside its record (:class:`~.reading.LineSeek`)."""

from __future__ import annotations

import pytest

from dsh_todo.harness.persistence.jsonl import reading
from dsh_todo.harness.persistence.jsonl.reading import LineSeek

LINES = b"".join(b'{"type":"step/end","seq":%d,"time":1,"data":{"seq":%d,"x":1}}\n' % (seq, seq + 7)
                 for seq in range(40))


def passed_on(seq: int, size: int) -> bytes | None:
    seek = LineSeek(seq)
    out = b"".join(text for start in range(0, len(LINES), size) for text in seek.pass_on(LINES[start:start + size]))
    return out if seek.found else None


@pytest.mark.parametrize("size", [1, 5, 33, 1000, 1 << 20])
def test_reading_goes_on_from_the_line_of_the_event(size: int) -> None:
    assert passed_on(20, size) == LINES[LINES.index(b'{"type":"step/end","seq":13,'):]  # a nested key comes first
    assert passed_on(3, size) == LINES[LINES.index(b'{"type":"step/end","seq":3,'):]
    assert passed_on(0, size) == LINES


def test_an_event_without_a_line_of_its_own_is_not_found() -> None:
    assert passed_on(99, 64) is None


def test_a_line_longer_than_a_piece_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "CHUNK_SIZE", 100)
    long = b'{"type":"step/end","seq":1,"data":"' + b"x" * 500 + b'"}\n'
    seek = LineSeek(2)
    for start in range(0, len(long), 50):
        assert seek.pass_on(long[start:start + 50]) == ()
    assert seek.pass_on(b'{"type":"step/end","seq":2,"time":1}\n') == ()
    assert not seek.found
