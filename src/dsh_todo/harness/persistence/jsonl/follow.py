"""Following a JSONL log that another process is writing: each change costs the bytes it added, not the log.

Re-reading the whole file on each change made following quadratic (at 50k events a 10 events/s trickle kept a core
half busy). :class:`LogTail` reads the whole log once, through the backend's own read (so the first verdict is
exactly the reader's), and then only what was appended, through the same exact pass continued
(:func:`~.reading.read_on`): from the end of the last whole line or frame; one still being written is read again,
whole, once it is complete. Anything that pass cannot take as it is (a bad line, a frame failing validation, an
event type the reader refuses, a file replaced or shrunk) makes it read the whole log again through the backend, so
a follower's verdict is always the reader's, word for word. A log that failed is not read again until its file
changes (its verdict stands till then). :class:`FileFollow` is the :class:`~..followers.Follower` that polls a
:class:`LogTail` on a background thread (a ``stat`` per interval; files cannot push).
"""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Final, Self

from dsh_todo.harness.errors import EncodingError
from dsh_todo.harness.persistence.contract import Callback, Record
from dsh_todo.harness.persistence.errors import SessionLogError, SessionNotFoundError
from dsh_todo.harness.persistence.followers import Follower
from dsh_todo.harness.persistence.header import Meta
from dsh_todo.harness.persistence.jsonl.paths import compression_of
from dsh_todo.harness.persistence.jsonl.reading import identity, read_on
from dsh_todo.harness.persistence.jsonl.regular import open_binary
from dsh_todo.harness.persistence.jsonl.zstd import scan_frames

if TYPE_CHECKING:
    from dsh_todo.harness.persistence.jsonl.reader import JsonlReader


FIND_EVERY: Final = 5
"""While a followed log does not exist, look for it every this many polls (a directory scan, not a stat)."""


def read_from(path: Path, offset: int) -> bytes:
    """The bytes of ``path`` from ``offset`` to its end (the one place a tail touches the file's contents)."""
    with open_binary(path) as file:
        file.seek(offset)
        return file.read()


class LogTail:
    """One log file of ``backend``, read from where the last :meth:`read` stopped (see the module docstring)."""

    def __init__(self, backend: JsonlReader, session_id: str, path: Path) -> None:
        self.backend = backend
        self.session_id = session_id
        self.path = path
        self._meta: Meta | None = None
        """The header once the whole log was read (``None``: read it whole next)."""
        self._offset = self._next = 0
        """Where the next read continues (a record start), and the seq it expects there."""
        self._file: tuple[int, ...] | None = None
        """The device and inode read so far: another one is another file (the log was replaced)."""
        self._seen: tuple[int, ...] | None = None
        """The identity of the file when it was last read on (nothing to read until it changes)."""
        self._failed: tuple[tuple[int, ...], SessionLogError] | None = None
        """The file a whole read refused, and its verdict: given again, not read again, until the file changes (so
        a follower of a log that stays refused while it grows hears one verdict, not one per append)."""

    def read(self) -> list[Record]:
        """The events committed since the last read; every event of the log on the first read and after the file
        was replaced (a caller drops seqs it already has). Raises the reader's error for a log it refuses, and
        ``OSError`` when the file is gone."""
        now = identity(self.path)
        if self._failed is not None and now == self._failed[0]:
            raise self._failed[1].with_traceback(None)
        if now == self._seen:
            return []
        if self._meta is None or now[:2] != self._file or now[2] < self._offset:
            return self._read_whole()
        try:
            found = read_on(io.BytesIO(read_from(self.path, self._offset)), self._meta, self._next, self.path)
        except (SessionLogError, EncodingError):
            found = None
        if found is None:
            return self._read_whole()
        tail, used, self._next = found
        self._offset += used
        self._seen = now  # every byte there was is taken, or waits for its record to be whole: until it changes
        return tail.events or []

    def _read_whole(self) -> list[Record]:
        """The backend's own read, noting where the next read continues: after the record (line or frame) holding
        the last event it gave, wherever the file has grown to since (a writer may append during a long read)."""
        self._meta = self._seen = None
        before = identity(self.path)
        try:
            stored = self.backend.read(self.session_id)
        except SessionLogError as exc:
            if identity(self.path) == before:
                self._failed = before, exc
            raise
        self._failed = None
        if stored.path != self.path:
            self.path = stored.path or self.path
            raise _moved(self.session_id)
        events = stored.events
        self._next = len(events)
        if stored.torn is not None:
            self._offset = stored.torn.truncate_to
            self._next -= len(stored.torn.recovered)  # a cut zstd frame is read again, whole, once it is complete
        else:
            self._offset = self._record_end(stored.last_record or 0)  # no event: the header is the last record
        self._meta, self._file = stored.meta, before[:2]
        return events

    def _record_end(self, start: int) -> int:
        """Where the record (a line, or a zstd frame) that starts at byte ``start`` ends."""
        data = read_from(self.path, start)
        if compression_of(self.path) == "zstd":
            frames = scan_frames(data, max_frames=1).frames
            if not frames:
                raise _moved(self.session_id)  # rewritten under us: look again
            return start + frames[0][1]
        end = data.find(b"\n")
        if end < 0:
            raise _moved(self.session_id)
        return start + end + 1


def _moved(session_id: str) -> SessionNotFoundError:
    return SessionNotFoundError(f'session "{session_id}" moved to another log file')


class FileFollow(Follower):
    """A :class:`LogTail` looked at every ``interval`` seconds on a daemon thread, never concurrently. A log that
    does not exist yet is looked for until it does; one the reader refuses is followed again when its file changes."""

    def __init__(self, backend: JsonlReader, session_id: str, after_seq: int, callback: Callback, *,
                 interval: float) -> None:
        super().__init__(session_id, after_seq, callback)
        self.backend, self.interval = backend, interval
        self._tail: LogTail | None = None
        self._polls = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def start(self) -> Self:
        """The first look on this thread (raising the reader's verdict), then the others in the background."""
        super().start()
        threading.Thread(target=self._run, name=f"follow {self.session_id}", daemon=True).start()
        return self

    def close(self) -> None:
        super().close()
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.look()

    def look(self, *, raising: bool = False) -> None:
        """One look at a time. (The tail's reads have refused unknown event types already, naming the log's path.)"""
        with self._lock:
            if not self.closed:
                self.step(self._fresh, self.backend.location, raising=raising)

    poll = look
    """Look now rather than at the next interval: what a follower that polls offers (the web's asks for it)."""

    def _fresh(self, session_id: str, after_seq: int) -> list[Record]:
        """What a read finds after ``after_seq`` (it may give the whole log again); nothing when the follower was
        closed during the read."""
        events = self._read()
        return [] if self.closed else [event for event in events if event["seq"] > after_seq]

    def _read(self) -> list[Record]:
        if self._tail is None:
            self._polls += 1
            if self._polls > 1 and self._polls % FIND_EVERY:
                return []
            path = self.backend.find(self.session_id)
            if path is None:
                return []
            self._tail = LogTail(self.backend, self.session_id, path)
        try:
            return self._tail.read()
        except (OSError, SessionNotFoundError):  # moved or removed since it was found: look for it again
            self._tail = None
            return []
