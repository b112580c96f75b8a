"""Cross-process push: followers hear of committed events through ``LISTEN``/``NOTIFY`` and read them back by seq.

Every write batch commits with ``NOTIFY dsh_todo_events, '<session id>:<last seq>'`` (:class:`.backend.PgWriter`), a
doorbell rather than the data (decision 0003): a follower reads ``seq > <what it has>``, so one read catches up
however many notifications it coalesces or missed.

An :class:`EventFeed` keeps one listening connection per backend and one more for reading (a :class:`~.reads.Reads`
of its own: the two queries a follower needs, not a second backend), on one background thread.
Each subscription's callback gets each run of new events, in seq order, exactly once, never concurrently with
itself; it runs on the feed's thread (or, for the first read, the subscriber's), so it should hand the events to its
own loop or queue and return. Nothing is lost around the edges:

- a subscription starts only once ``LISTEN`` is active, then reads what is already there, so an event committed
  while it was being set up is either in that read or announced afterwards (a seq watermark drops repeats);
- if the listening connection breaks, the feed reconnects with backoff and re-reads every subscription, because
  notifications sent while it was away are gone;
- a slow safety poll (``poll_interval``, 5 s) compares each subscription with ``next_seq`` anyway.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final, Protocol

from dsh_todo.harness.persistence.contract import Callback
from dsh_todo.harness.persistence.followers import Follower
from dsh_todo.harness.persistence.postgres.connection import Conn, connect
from dsh_todo.harness.persistence.postgres.reads import Reads

if TYPE_CHECKING:
    from dsh_todo.harness.persistence.contract import Record
    from dsh_todo.harness.persistence.postgres.schema import Tables

log = logging.getLogger("dsh_todo.persistence")

WAIT_S: Final = 0.25
"""How long the listening thread blocks before it checks whether to stop or poll."""
READY_TIMEOUT_S: Final = 15.0
BACKOFF_MAX_S: Final = 5.0


class Subscription(Follower):
    """One follower of one session; :meth:`close` ends it."""

    def __init__(self, feed: EventFeed, session_id: str, after_seq: int, callback: Callback) -> None:
        super().__init__(session_id, after_seq, callback)
        self.feed = feed
        self._lock = threading.Lock()

    def close(self) -> None:
        super().close()
        self.feed._remove(self)

    def look(self, *, raising: bool = False) -> None:
        """Deliver whatever the log holds after ``after_seq`` (serialized: one reader at a time)."""
        with self._lock:
            if not self.closed:
                self.step(self.feed.reader.read_from, self.feed.reader.location, raising=raising)

    def __repr__(self) -> str:
        return f"<Subscription {self.session_id!r} after {self.after_seq}>"


class Source(Protocol):
    """What a feed reads through: a backend (:class:`.backend.PgBackend`, which imports this module, so a protocol
    here, decision 0044), of which the feed opens one more for its own connection."""

    url: str
    poll_interval: float
    tables: Tables
    location: str

    def __init__(self, url: str, *, schema: str = ...) -> None: ...
    def read_from(self, session_id: str, after_seq: int = -1) -> Sequence[Record]: ...
    def next_seqs(self, session_ids: Iterable[str]) -> dict[str, int]: ...
    def close(self) -> None: ...


class EventFeed:
    """Delivers events committed by any process to this process's subscriptions."""

    def __init__(self, backend: Source) -> None:
        self.poll_interval = backend.poll_interval
        self.reader = Reads(backend.url, backend.tables, backend.location)  # its own connection; the tables exist
        self._subs: dict[str, set[Subscription]] = {}
        self._guard = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def subscribe(self, session_id: str, after_seq: int, callback: Callback) -> Subscription:
        """Call ``callback(events)`` with every event of ``session_id`` after ``after_seq``, now and as they commit.

        Blocks until the feed is listening and the first read is delivered. ``after_seq`` is ``-1`` for the whole log.
        """
        with self._guard:
            if self._stop.is_set():
                raise RuntimeError("the event feed is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dsh-todo-pg-feed", daemon=True)
                self._thread.start()
        if not self._ready.wait(READY_TIMEOUT_S):
            raise ConnectionError(f"could not listen for session events in {self.reader.location}: "
                                  f"{self._error or 'timed out'}")
        subscription = Subscription(self, session_id, after_seq, callback)
        with self._guard:
            self._subs.setdefault(session_id, set()).add(subscription)
        return subscription.start()

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(READY_TIMEOUT_S)
        with self._guard:
            subs = [sub for group in self._subs.values() for sub in group]
            self._subs.clear()
        for sub in subs:
            sub.closed = True
        self.reader.close()

    # -- internals ------------------------------------------------------------------------------------------

    def _remove(self, subscription: Subscription) -> None:
        with self._guard:
            group = self._subs.get(subscription.session_id)
            if group is not None:
                group.discard(subscription)
                if not group:
                    del self._subs[subscription.session_id]

    def _subscriptions(self, session_id: str | None = None) -> list[Subscription]:
        """Every subscription, or those of one session."""
        with self._guard:
            groups = self._subs.values() if session_id is None else [self._subs.get(session_id, set())]
            return [sub for group in groups for sub in group]

    def _catch_up(self, subs: Sequence[Subscription]) -> None:
        for sub in subs:
            try:
                sub.look()
            except Exception:
                log.warning("cannot read new events of session %r", sub.session_id, exc_info=True)

    def _poll(self) -> None:
        subs = self._subscriptions()
        if not subs:
            return
        lengths = self.reader.next_seqs({sub.session_id for sub in subs})
        self._catch_up([sub for sub in subs if lengths.get(sub.session_id, 0) - 1 > sub.after_seq])

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            conn: Conn | None = None
            try:
                conn = connect(self.reader.url, "listener")
                conn.execute(f'LISTEN "{self.reader.tables.channel}"')
                self._ready.set()
                backoff = 0.1
                self._catch_up(self._subscriptions())  # anything announced while we were not listening
                self._listen(conn)
            except Exception as exc:  # a lost connection above all; nothing may end the thread but close()
                self._error = exc
                self._ready.clear()
                if not self._stop.is_set():
                    log.warning("session event feed lost its connection; reconnecting in %.1fs", backoff,
                                exc_info=True)
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, BACKOFF_MAX_S)
            finally:
                if conn is not None:
                    conn.close()

    def _listen(self, conn: Conn) -> None:
        next_poll = time.monotonic() + self.poll_interval
        while not self._stop.is_set():
            for notify in conn.notifies(timeout=WAIT_S):
                session_id, _, seq_text = notify.payload.rpartition(":")
                try:
                    last = int(seq_text)
                except ValueError:
                    continue
                self._catch_up([sub for sub in self._subscriptions(session_id) if sub.after_seq < last])
                if self._stop.is_set():
                    return
            if time.monotonic() >= next_poll:
                self._poll()
                next_poll = time.monotonic() + self.poll_interval
