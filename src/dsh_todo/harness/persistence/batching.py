"""Write-behind: live appends are queued at once and made durable in batches, off the caller's path.

``Session.append`` runs on the agent's hot path, so the persistence listener only queues the event (a lock and a
list append). The first event queued for an idle session opens a fixed window (``writeBatchMaxDelayMs``, 200 ms by
default); when it closes, everything queued is written as one batch, which is one fsync and, under zstd, one frame.
:meth:`WriteBehind.flush` skips the wait.

The window is kept by one background thread per store rather than by an asyncio timer, because sessions are appended
to from synchronous code as well as from event loops (the CLI, tests, the MCP server's worker threads), and a batch
must be written even when no loop is running. The thread spends its time in ``write``/``fsync``, which release the
GIL. Each session's batches are written under its own I/O lock, taken *before* the queue is emptied, so a flush
from the caller and a timed write from the thread can never reorder two batches.

A batch that fails to write (disk full, say) goes back to the head of its queue and is retried after a pause; the
log stays consistent because a failed append is cut back before the error surfaces.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any, Final

from dsh_todo.harness.persistence.errors import SessionWriteError
from dsh_todo.harness.persistence.logfile import LogWriter

log = logging.getLogger("dsh_todo.persistence")

RETRY_PAUSE_S: Final = 1.0


class SessionQueue:
    """One session's pending events and its writer. ``next_seq`` is the seq the next queued event must carry."""

    __slots__ = ("deadline", "error", "io_lock", "next_seq", "pending", "writer")

    def __init__(self, writer: LogWriter) -> None:
        self.writer = writer
        self.pending: list[Mapping[str, Any]] = []
        self.deadline = 0.0
        self.next_seq = writer.cursor
        self.io_lock = threading.Lock()
        self.error: BaseException | None = None


class WriteBehind:
    """Coalesces queued events into durable batches on a background thread."""

    def __init__(self, delay_ms: int = 200) -> None:
        self.delay = delay_ms / 1000
        self._cond = threading.Condition()
        self._queues: dict[str, SessionQueue] = {}
        self._thread: threading.Thread | None = None
        self._stopping = False
        atexit.register(self.close)

    def open(self, writer: LogWriter) -> SessionQueue:
        """Start queueing for ``writer``'s session."""
        with self._cond:
            if self._stopping:
                raise RuntimeError("session writer is closed")
            if writer.session_id in self._queues:
                raise ValueError(f'session "{writer.session_id}" already has a queue')
            queue = SessionQueue(writer)
            self._queues[writer.session_id] = queue
            return queue

    def get(self, session_id: str) -> SessionQueue | None:
        return self._queues.get(session_id)

    def enqueue(self, queue: SessionQueue, event: Mapping[str, Any]) -> None:
        """Queue one event; the first event of an idle queue opens the batch window."""
        with self._cond:
            if self._queues.get(queue.writer.session_id) is not queue:
                raise SessionWriteError(f'session "{queue.writer.session_id}" is no longer persisted')
            if event.get("seq") != queue.next_seq:
                raise SessionWriteError(f'session "{queue.writer.session_id}" persistence expected seq '
                                        f"{queue.next_seq}, got {event.get('seq')!r}")
            queue.next_seq += 1
            if not queue.pending:
                queue.deadline = time.monotonic() + self.delay
                self._start()
                self._cond.notify()
            queue.pending.append(event)

    def flush(self, session_id: str | None = None) -> None:
        """Write what is queued now (for one session, or all), without waiting for the window."""
        with self._cond:
            if session_id is None:
                queues = list(self._queues.values())
            else:
                queue = self._queues.get(session_id)
                queues = [queue] if queue is not None else []
        for queue in queues:
            self._write(queue, background=False)

    def release(self, session_id: str) -> None:
        """Flush one session, stop queueing for it and release its writer lock."""
        with self._cond:
            queue = self._queues.get(session_id)
        if queue is None:
            return
        try:
            self._write(queue, background=False)
        finally:
            with self._cond:
                self._queues.pop(session_id, None)
            with queue.io_lock:
                queue.writer.close()

    def close(self) -> None:
        """Flush everything, stop the thread and release every writer lock. Safe to call twice."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        errors: list[BaseException] = []
        with self._cond:
            session_ids = list(self._queues)
        for session_id in session_ids:
            try:
                self.release(session_id)
            except BaseException as exc:
                errors.append(exc)
        atexit.unregister(self.close)
        if errors:
            raise errors[0]

    # -- internals ------------------------------------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="dsh-session-writer", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopping:
                        return
                    now = time.monotonic()
                    waiting = [queue for queue in self._queues.values() if queue.pending]
                    due = [queue for queue in waiting if queue.deadline <= now]
                    if due:
                        break
                    timeout = min(queue.deadline for queue in waiting) - now if waiting else None
                    self._cond.wait(timeout)
            for queue in due:
                self._write(queue, background=True)

    def _write(self, queue: SessionQueue, *, background: bool) -> None:
        with queue.io_lock:
            with self._cond:
                batch, queue.pending = queue.pending, []
            if not batch:
                return
            try:
                queue.writer.append(batch)
            except Exception as exc:
                with self._cond:
                    queue.pending[:0] = batch
                    queue.deadline = time.monotonic() + max(self.delay, RETRY_PAUSE_S)
                    self._cond.notify()
                queue.error = exc
                if background:
                    log.warning('could not write %d events of session "%s"; will retry', len(batch),
                                queue.writer.session_id, exc_info=True)
                    return
                raise SessionWriteError(f'could not write {len(batch)} events of session '
                                        f'"{queue.writer.session_id}": {exc}') from exc
            queue.error = None
