"""Write-behind: live appends are queued at once and made durable in batches, off the caller's path.

``Session.append`` is on the agent's hot path, so the persistence listener only queues the event: a seq check and a
``deque.append``, with no lock unless it opens a window (a lock per event cost more than the append: decision 0009).
The first event queued for an idle session opens a window (``writeBatchMaxDelayMs``, 200 ms by default); when it
closes, everything queued is written as one batch: one fsync and, under zstd, one frame. :meth:`WriteBehind.flush`
skips the wait. The windows are kept by one thread per backend, not an asyncio timer, because sessions are appended
to from synchronous code too and a batch must be written with no loop running. Each session's batches are written
under its own I/O lock, taken *before* the queue is emptied, so a flush and a timed write never reorder two batches.

A batch that fails to write (disk full) goes back to the head of its queue and is retried after a pause (a failed
append is cut back before its error surfaces, so the log stays consistent). A failure is said once per *episode*
(from a session's first failed write to its next successful one), on one line, and its end once more: a disk full for
an hour is two lines, not a traceback a second. A flush that fails raises :class:`SessionWriteError` to its caller,
whose ``repeat`` says whether the episode was said already; the writer thread says it only once it outlasted a retry,
so a failure a flush's caller is about to report is one line, the caller's. Tracebacks only at ``DEBUG``.

A batch that cannot be encoded (:data:`UNENCODABLE`: the append refuses such values in its caller's thread, so only
a defect gets here) is not retried, since no retry can succeed: the log is *broken*. It is said once, that batch and
everything queued after it are dropped (written after it, they would leave a hole), and every later flush raises, so
the session's front door fails instead of answering as if its calls were durable. A log another process cut, replaced
or removed (:class:`SessionLogChangedError`, raised by the file writer) breaks the session the same way: appending
after bytes we never wrote would vouch for them, so that error is the last word on the session's log.

Durability listeners (:meth:`WriteBehind.on_written`) hear of every batch once it is fsynced, with where it landed,
on the thread that wrote it and under the session's I/O lock, so they see one session's batches in order (the
checkpoint plugin checkpoints only durable events this way).
"""

from __future__ import annotations

import atexit
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Final

from dsh_todo.harness.persistence.contract import LogWriter, WrittenListener
from dsh_todo.harness.persistence.errors import SessionLogChangedError, SessionWriteError

log = logging.getLogger("dsh_todo.persistence")

RETRY_PAUSE_S: Final = 1.0
UNENCODABLE: Final = (TypeError, ValueError, RecursionError)
"""What encoding a batch raises for a value JSON cannot carry (orjson's error is a ``TypeError``; the standard
library's are ``TypeError``, ``ValueError`` and, nested too deeply, ``RecursionError``); a retry cannot help."""
LINGER_S: Final = 5.0
"""How long the writer thread keeps waking once per window after its last batch, before it sleeps until called."""


class SessionQueue:
    """One session's pending events and its writer. ``next_seq`` is the seq the next queued event must carry.

    ``pending`` is appended to by the session's (one) appending thread without a lock and emptied from the left by
    whoever writes, under the condition; ``armed`` (changed only under the condition) says a window is open for
    what is pending. The writer disarms *before* it takes events, so an event appended meanwhile is either taken or
    finds the queue disarmed and opens a window itself.
    """

    __slots__ = ("armed", "broken", "cuts", "deadline", "error", "io_lock", "next_seq", "pending", "refusal", "said",
                 "writer")

    def __init__(self, writer: LogWriter) -> None:
        self.writer = writer
        self.pending: deque[Mapping[str, Any]] = deque()
        self.armed = False
        self.cuts: list[int] = []
        """Seqs after which a batch must end (ascending), asked for by :meth:`WriteBehind.flush_soon`."""
        self.deadline = 0.0
        self.next_seq = writer.cursor
        self.io_lock = threading.Lock()
        self.error: BaseException | None = None
        """Why the last write failed; ``None`` once one succeeds (the episode is over)."""
        self.said = False
        """Whether this episode was said (the writer thread's warning, or raised to a flush's caller)."""
        self.broken: str | None = None
        """Why the log takes no more events (a batch that could not be encoded, a log changed by another process);
        said once, then raised by flushes as a ``refusal``."""
        self.refusal: type[SessionWriteError] = SessionWriteError


class WriteBehind:
    """Coalesces queued events into durable batches on a background thread."""

    def __init__(self, delay_ms: int = 200) -> None:
        self.delay = delay_ms / 1000
        self._cond = threading.Condition()
        self._queues: dict[str, SessionQueue] = {}
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._wake_at: float | None = -math.inf
        """When the writer thread will look at the queues next by itself: ``None`` when it sleeps until notified,
        ``-inf`` while it is awake (it looks again before it sleeps)."""
        self._written: list[WrittenListener] = []
        atexit.register(self.close)

    def on_written(self, listener: WrittenListener) -> Callable[[], None]:
        """Call ``listener(session_id, batch)`` after each durable batch; returns a function that removes it."""
        self._written.append(listener)

        def remove() -> None:
            if listener in self._written:
                self._written.remove(listener)

        return remove

    def open(self, writer: LogWriter) -> SessionQueue:
        """Start queueing for ``writer``'s session."""
        with self._cond:
            if self._stopping:
                raise RuntimeError("session writer is closed")
            if writer.session_id in self._queues:
                raise ValueError(f'session "{writer.session_id}" already has a queue')
            queue = self._queues[writer.session_id] = SessionQueue(writer)
            return queue

    def announce(self, session_id: str) -> None:
        """Tell the durability listeners where a session's log already stands (after a load), if known."""
        queue = self._queues.get(session_id)
        if queue is None:
            return
        with queue.io_lock:
            self._notify(queue)

    def get(self, session_id: str) -> SessionQueue | None:
        return self._queues.get(session_id)

    def enqueue(self, queue: SessionQueue, event: Mapping[str, Any]) -> None:
        """Queue one event (from the session's appending thread); the first event of an idle queue opens the batch
        window."""
        if self._queues.get(queue.writer.session_id) is not queue:
            raise SessionWriteError(f'session "{queue.writer.session_id}" was released: its log takes no more '
                                    "events until the session is loaded again")
        if event.get("seq") != queue.next_seq:
            raise SessionWriteError(f'session "{queue.writer.session_id}" persistence expected seq '
                                    f"{queue.next_seq}, got {event.get('seq')!r}")
        queue.next_seq += 1
        if queue.broken is not None:
            return  # nothing more is written (a hole would follow): every flush says so
        queue.pending.append(event)
        if not queue.armed:
            with self._cond:
                if not queue.armed and queue.pending:
                    queue.armed = True
                    queue.deadline = deadline = time.monotonic() + self.delay
                    self._start()
                    # Wake the writer thread only if it would not look in time by itself: a durable call (arm,
                    # then flush at once) would otherwise cost a thread switch for a window it never needs.
                    if self._wake_at is None or deadline < self._wake_at:
                        self._cond.notify()

    def flush_soon(self, session_id: str, through: int) -> None:
        """Write everything queued up to seq ``through`` soon, on the writer thread, as a batch ending there.

        Cheap for the caller (no I/O); what is queued after ``through`` waits for its own window. This is how a
        ``turn/end`` gets its batch boundary: a zstd frame, and a durable point to checkpoint, right after it. A
        :meth:`flush` that comes first writes through the cut (one batch, one fsync for the caller waiting on it).
        """
        with self._cond:
            queue = self._queues.get(session_id)
            if queue is None or not queue.pending or through < queue.pending[0]["seq"]:
                return  # nothing of it is still queued: it is written, or being written
            cuts = queue.cuts
            if not cuts or cuts[-1] < through:
                cuts.append(through)
            queue.armed = True
            queue.deadline = time.monotonic()
            self._start()
            self._cond.notify()

    def flush(self, session_id: str | None = None) -> None:
        """Write what is queued now (for one session, or all), without waiting for the window."""
        with self._cond:
            queues = list(self._queues.values()) if session_id is None else [self._queues.get(session_id)]
        for queue in queues:
            if queue is not None:
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
        try:
            for session_id in session_ids:
                try:
                    self.release(session_id)
                except BaseException as exc:
                    if isinstance(exc, SessionWriteError) and exc.repeat:  # its caller says it: the loss is no news
                        log.debug("%s", exc, exc_info=True)
                    else:
                        errors.append(exc)
        finally:
            atexit.unregister(self.close)  # failed or not, there is nothing left to retry at exit
        if errors:
            raise errors[0]

    # -- internals ------------------------------------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="dsh-session-writer", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        """Write each window when it closes. With nothing queued the thread still wakes once per window for a
        while (:data:`LINGER_S`), so a window opened meanwhile needs no notification; then it sleeps until one."""
        idle_since: float | None = None
        while True:
            with self._cond:
                while True:
                    if self._stopping:
                        return
                    now = time.monotonic()
                    waiting = [queue for queue in self._queues.values() if queue.armed]
                    due = [queue for queue in waiting if queue.deadline <= now]
                    if due:
                        break
                    if waiting:
                        idle_since = None
                        self._wake_at = min(queue.deadline for queue in waiting)
                    else:
                        idle_since = now if idle_since is None else idle_since
                        self._wake_at = now + self.delay if now - idle_since < LINGER_S else None
                    self._cond.wait(None if self._wake_at is None else self._wake_at - now)
                self._wake_at = -math.inf
            for queue in due:
                self._write(queue, background=True)

    def _write(self, queue: SessionQueue, *, background: bool) -> None:
        """Write what is queued: when flushing, everything queued by then as one batch (someone waits for it: one
        fsync, whatever cuts were asked for); when timed, the due part as batches each ending at a cut if one falls
        inside (a batch up to a cut leaves the rest to its own window unless it holds a cut)."""
        with queue.io_lock:
            while True:
                if queue.broken is not None:
                    if background:
                        return
                    raise queue.refusal(queue.broken, repeat=True)
                with self._cond:
                    batch, cut = self._take(queue, whole=not background)
                    more = bool(queue.pending) and queue.deadline <= time.monotonic()
                if not batch:
                    return
                try:
                    queue.writer.append(batch)
                except SessionLogChangedError as exc:  # the file is not ours any more: no retry, nothing after it
                    with self._cond:
                        queue.pending.clear()
                        queue.cuts.clear()
                        queue.armed = False
                        queue.broken, queue.refusal = str(exc), SessionLogChangedError
                    queue.error, queue.said = exc, True
                    if background:
                        log.warning("%s", exc, exc_info=log.isEnabledFor(logging.DEBUG))
                        return
                    raise
                except UNENCODABLE as exc:  # no retry can succeed: drop it and all after it, say so once
                    with self._cond:
                        queue.pending.clear()
                        queue.cuts.clear()
                        queue.armed = False
                        queue.broken = (f'session "{queue.writer.session_id}" cannot be written any more: '
                                        f"{len(batch)} events could not be encoded: {exc}")
                    queue.error, queue.said = exc, True
                    if background:
                        log.warning("%s", queue.broken, exc_info=log.isEnabledFor(logging.DEBUG))
                        return
                    raise SessionWriteError(queue.broken) from exc
                except Exception as exc:
                    with self._cond:
                        queue.pending.extendleft(reversed(batch))
                        if cut:
                            queue.cuts.insert(0, batch[-1]["seq"])
                        queue.armed = True
                        queue.deadline = time.monotonic() + max(self.delay, RETRY_PAUSE_S)
                        self._cond.notify()
                    retried, queue.error = queue.error is not None, exc
                    message = f'could not write {len(batch)} events of session "{queue.writer.session_id}": {exc}'
                    if background:
                        if retried and not queue.said:  # it outlasted a retry, and no flush's caller has said it
                            queue.said = True
                            log.warning("%s; retrying until it can", message,
                                        exc_info=log.isEnabledFor(logging.DEBUG))
                        return
                    repeat, queue.said = queue.said, True
                    raise SessionWriteError(message, repeat=repeat) from exc
                if queue.said:
                    log.warning('session "%s" is written again', queue.writer.session_id)
                queue.error, queue.said = None, False
                self._notify(queue)
                if not (background and more):  # a flush took everything queued when it was called: done
                    return

    def _take(self, queue: SessionQueue, *, whole: bool = False) -> tuple[list[Mapping[str, Any]], bool]:
        """The next batch to write (under ``_cond``): the pending events up to the first cut inside them, or all
        (always all when ``whole``).

        Returns the batch and whether it ends at a cut that left events behind.
        """
        queue.armed = False  # first: an event appended from here on is taken below or re-arms the queue itself
        pending = queue.pending
        count = len(pending)  # what is queued now; later appends wait for their own window
        if not count:
            return [], False
        cuts = queue.cuts
        first: int = pending[0]["seq"]
        last: int = pending[count - 1]["seq"]
        while cuts and cuts[0] < first:
            cuts.pop(0)
        popleft = pending.popleft
        if cuts and cuts[0] < last and not whole:
            size = cuts.pop(0) - first + 1
            batch = [popleft() for _ in range(size)]
            # The rest is due at once if it holds another cut; otherwise it opens its own window.
            queue.armed = True
            queue.deadline = time.monotonic() + (0 if cuts and cuts[0] <= last else self.delay)
            return batch, True
        while cuts and cuts[0] <= last:
            cuts.pop(0)
        batch = [popleft() for _ in range(count)]
        if pending:  # appended while we took: their window opens now
            queue.armed = True
            queue.deadline = time.monotonic() + self.delay
        return batch, False

    def _notify(self, queue: SessionQueue) -> None:
        landed = queue.writer.last_batch
        if landed is None:
            return
        for listener in list(self._written):
            try:
                listener(queue.writer.session_id, landed)
            except Exception:
                log.warning('durability listener failed for session "%s"', queue.writer.session_id, exc_info=True)
