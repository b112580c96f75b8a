"""The write-behind queue: events queued without a lock still land once each, in order, in the window they opened.

Driven with an in-memory writer, so what is checked is the queue's bookkeeping (windows, the writer thread's
wake-ups, flushes racing appends), not a file.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from dsh_todo.harness.persistence import batching
from dsh_todo.harness.persistence.batching import WriteBehind
from dsh_todo.harness.persistence.contract import Batch
from dsh_todo.harness.persistence.errors import SessionWriteError


class ListWriter:
    """A :class:`~dsh_todo.harness.persistence.contract.LogWriter` that keeps its batches in a list."""

    def __init__(self, session_id: str = "s") -> None:
        self.session_id = session_id
        self.cursor = 0
        self.last_batch: Batch | None = None
        self.open = True
        self.batches: list[list[int]] = []
        self.landed = threading.Condition()

    def append(self, events: Sequence[Mapping[str, Any]]) -> None:
        seqs = [event["seq"] for event in events]
        assert seqs == list(range(self.cursor, self.cursor + len(seqs))), "batches continue the log exactly"
        with self.landed:
            self.batches.append(seqs)
            self.cursor += len(seqs)
            self.last_batch = Batch(seqs[0], seqs[-1])
            self.landed.notify_all()

    def close(self) -> None:
        self.open = False

    def wait_for(self, count: int) -> bool:
        """Whether ``count`` events are written within a generous bound (never a timing assertion)."""
        with self.landed:
            return self.landed.wait_for(lambda: self.cursor >= count, timeout=30)


@pytest.fixture
def writes() -> Iterator[WriteBehind]:
    behind = WriteBehind(delay_ms=20)
    yield behind
    behind.close()


def event(seq: int) -> dict[str, Any]:
    return {"type": "step/start", "seq": seq, "time": 0, "data": {}}


def test_a_window_opened_while_the_thread_lingers_is_written_without_a_flush(writes: WriteBehind) -> None:
    """Opening a window does not wake the writer thread when it will look in time anyway (it lingers, waking once
    per window, after a batch): the window must still be written when it closes."""
    writer = ListWriter()
    queue = writes.open(writer)
    writes.enqueue(queue, event(0))
    writes.flush()
    writes.enqueue(queue, event(1))
    writes.enqueue(queue, event(2))
    assert writer.wait_for(3)
    assert writer.batches == [[0], [1, 2]]


def test_a_window_opened_after_the_thread_stopped_lingering_wakes_it(writes: WriteBehind,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batching, "LINGER_S", 0.0)
    writer = ListWriter()
    queue = writes.open(writer)
    writes.enqueue(queue, event(0))
    assert writer.wait_for(1)
    with writes._cond:  # the thread sleeps until called once its linger is over
        assert writes._cond.wait_for(lambda: writes._wake_at is None, timeout=30)
    writes.enqueue(queue, event(1))
    assert writer.wait_for(2)
    assert writer.batches == [[0], [1]]


def test_flushes_racing_appends_write_every_event_once_in_order(writes: WriteBehind) -> None:
    """One thread appends (as a session does) while another flushes over and over and the writer thread writes
    the windows: no event is lost, none written twice, the batches continue one another exactly."""
    writer = ListWriter()
    queue = writes.open(writer)
    total = 20_000
    done = threading.Event()

    def flusher() -> None:
        while not done.is_set():
            writes.flush("s")

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for seq in range(total):
            writes.enqueue(queue, event(seq))
    finally:
        done.set()
        thread.join()
    assert writer.wait_for(total)
    assert [seq for batch in writer.batches for seq in batch] == list(range(total))


class FailingWriter(ListWriter):
    """Refuses its next ``failures`` batches as a full disk does, then writes."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0

    def append(self, events: Sequence[Mapping[str, Any]]) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError(errno.ENOSPC, "No space left on device")
        super().append(events)


def test_a_full_disk_is_said_once_per_episode_and_once_more_when_it_recovers(
        writes: WriteBehind, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Repro (issue 22 item 4): the writer thread warned ``could not write … will retry`` with a traceback on every
    retry, once a second for as long as the disk stayed full. Now one line once the failure outlasts a retry (a
    flush's caller would have said it at once), one when it ends, no traceback (``--debug`` shows them)."""
    monkeypatch.setattr(batching, "RETRY_PAUSE_S", 0.01)
    writer = FailingWriter()
    queue = writes.open(writer)
    with caplog.at_level(logging.WARNING, logger="dsh_todo.persistence"):
        for episode in range(2):
            writer.failures = 5
            writes.enqueue(queue, event(episode))
            assert writer.wait_for(episode + 1)
            writes.flush()  # waits for the session's I/O lock: the thread has said what it says after a write
    said = [(record.getMessage(), bool(record.exc_info)) for record in caplog.records]
    assert said == [('could not write 1 events of session "s": [Errno 28] No space left on device; retrying until '
                     'it can', False),
                    ('session "s" is written again', False)] * 2


class UnencodableWriter(ListWriter):
    """Refuses every batch as the encoder refuses a value JSON cannot carry (a set reached the queue)."""

    def __init__(self) -> None:
        super().__init__()
        self.attempts = 0

    def append(self, events: Sequence[Mapping[str, Any]]) -> None:
        self.attempts += 1
        raise TypeError("Type is not JSON serializable: set")


def test_a_batch_that_cannot_be_encoded_is_said_once_and_never_retried(
        writes: WriteBehind, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Repro (issue 24): a batch the writer could not encode went back to the head of its queue and was tried again
    once a second for ever (the append is what refuses such data now; this is the writer's own guard). Now it is
    said once, on one line, and the session's log takes nothing more: every flush says so to its caller."""
    monkeypatch.setattr(batching, "RETRY_PAUSE_S", 0.01)
    writer = UnencodableWriter()
    queue = writes.open(writer)
    with caplog.at_level(logging.WARNING, logger="dsh_todo.persistence"):
        writes.enqueue(queue, event(0))
        deadline = time.monotonic() + 30
        while not caplog.records and time.monotonic() < deadline:  # the thread's window (20 ms) closes
            time.sleep(0.01)
        time.sleep(0.2)  # twenty retry pauses: a retried batch would have been tried again by now
        assert writer.attempts == 1
        writes.enqueue(queue, event(1))  # later events are not written either: the log would have a hole
        for _ in range(2):
            with pytest.raises(SessionWriteError) as caught:
                writes.flush("s")
            assert caught.value.repeat
            assert str(caught.value) == ('session "s" cannot be written any more: 1 events could not be encoded: '
                                         "Type is not JSON serializable: set")
        assert writer.attempts == 1 and not queue.armed
    said = [(record.getMessage(), bool(record.exc_info)) for record in caplog.records]
    assert said == [('session "s" cannot be written any more: 1 events could not be encoded: Type is not JSON '
                     "serializable: set", False)]


def test_a_flush_that_cannot_encode_raises_once_new_and_then_as_said(writes: WriteBehind) -> None:
    writer = UnencodableWriter()
    queue = writes.open(writer)
    writes.enqueue(queue, event(0))
    with pytest.raises(SessionWriteError) as first:
        writes.flush("s")
    assert not first.value.repeat and isinstance(first.value.__cause__, TypeError)
    with pytest.raises(SessionWriteError) as again:
        writes.flush("s")
    assert again.value.repeat and writer.attempts == 1
