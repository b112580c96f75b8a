"""The session log: one append-only, event-sourced list per agent session (SPEC §5).

``@deepseek-ai/dsh-session`` in DSH. A :class:`Session` only ever grows; :meth:`Session.append` takes a lossless,
frozen copy of the payload (sharing, uncopied, only what a checked constructor of :mod:`.frozen` proved, so nothing
reaches the log's writer that it cannot encode), asks the pre-commit observers (invariant companions live there and
may veto), pushes the event, then tells the post-commit listeners (projections, persistence, carriers), whose
failures are logged, never raised: once an event is in the log nothing can take it back. The :class:`SessionStore`
is the ``sessions`` service: it owns the live sessions and the two listener lists that every session reports to.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, cast, overload

from dsh_todo.harness.context import Context, Disposer, ServiceKey
from dsh_todo.harness.errors import CorruptSessionLogError
from dsh_todo.harness.errors import SessionAppendError as SessionAppendError
from dsh_todo.harness.event_types import KNOWN_SESSION_EVENT_TYPES as KNOWN_SESSION_EVENT_TYPES
from dsh_todo.harness.event_types import LOG_FORMAT_VERSION
from dsh_todo.harness.event_types import SURFACE_EVENT_TYPES as SURFACE_EVENT_TYPES
from dsh_todo.harness.event_types import Event as Event
from dsh_todo.harness.frozen import (
    CheckedDict,
    FrozenDict,
    FrozenList,
    NotLosslessJSON,
    freeze_trusted,
    lossless_copy,
)

log = logging.getLogger("dsh_todo.session")

name = "@deepseek-ai/dsh-session"
inject: list[str] = []


Observer = Callable[["Session", Event], object]

AgentErrorHook = Callable[[str, "Session", int, int, BaseException], object]
"""``(agent_id, session, turn, step, error)``: an agent's turn failed with ``error`` (DSH's ``agent/error``)."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def lossless_data(event_type: str, value: Any, path: str = "data") -> Any:
    """The frozen copy of ``value``, which is (or sits at ``path`` in) the data of an ``event_type`` event; raises
    :class:`SessionAppendError` naming the first place JSON cannot carry losslessly.

    An append shares checked data without looking into it, so a writer that builds its data with the checked
    constructors (``tool/result`` around a tool's content) checks the foreign parts here, with the words the append
    would use, and builds around the checked copy.
    """
    try:
        return lossless_copy(value, path)
    except NotLosslessJSON as exc:
        raise SessionAppendError(f'session event "{event_type}" data is not lossless JSON: {exc}') from None


_NO_DATA: Any = object()
"""``append``'s data when none was given: refused, as a missing argument was before ``type`` could be a keyword."""


def _renamed_type(event_type: str | None, renamed: dict[str, Any]) -> str | None:
    """``append(type=...)``, as DESIGN.md spelled it: the same as the type by position; any other keyword is refused
    as Python would refuse it."""
    given = renamed.pop("type", None)
    if renamed:
        raise TypeError(f"append() got an unexpected keyword argument {next(iter(renamed))!r}")
    if event_type is not None:
        raise TypeError("append() got the event type twice (by position and as type=)")
    return cast(str | None, given)


ReadBack = Callable[[int, int], Sequence[Event]]
"""``read_back(start, stop)``: the events with seqs ``start`` to ``stop - 1`` of a session, read from its store."""


class Held:
    """What a session holds of its log in memory, shared with its :class:`EventLog` (which must not refer to the
    session: the two would form a cycle, and a disposed runtime's sessions would wait for a full collection).

    ``window`` is ``(base, events)``, ``events[0]`` being the event of seq ``base`` (0 unless the session is
    bounded); it is replaced as a whole when the tail is cut, appended to in place otherwise. ``read_back`` reads the
    events before it from the session's store."""

    __slots__ = ("read_back", "session_id", "window")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.window: tuple[int, list[Event]] = (0, [])
        self.read_back: ReadBack | None = None


class EventLog(Sequence[Event]):
    """A read-only view of a session's events: callers can index and iterate but never change the log.

    Its length is always the session's ``seq`` and ``log[n]`` the event of seq ``n``. A session bounded in memory
    (:meth:`Session.bound`) holds only a recent tail; the events before it are durable in its store and read back
    from there when asked for (a whole read per request: for the rare look back, not a hot path). Each operation
    takes the session's window once (one attribute read), so a reader on another thread sees one consistent log even
    while the tail is cut.
    """

    __slots__ = ("_held",)

    def __init__(self, held: Held) -> None:
        self._held = held

    def _older(self, start: int, stop: int) -> Sequence[Event]:
        read_back = self._held.read_back
        if read_back is None:  # (cannot happen: only a bounded session lets go of events)
            raise IndexError(f"events {start} to {stop - 1} are no longer held in memory")
        events = read_back(start, stop)
        if len(events) != stop - start:
            raise CorruptSessionLogError(f'session "{self._held.session_id}": read back {len(events)} events of seqs '
                                     f"{start} to {stop - 1} from its store")
        return [event if isinstance(event, FrozenDict) else freeze_trusted(dict(event)) for event in events]

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | Sequence[Event]:
        base, held = self._held.window
        if isinstance(index, slice):
            if not base:
                return tuple(held[index])
            start, stop, step = index.indices(base + len(held))
            if step != 1:
                return tuple(self[seq] for seq in range(start, stop, step))
            if start >= base:
                return tuple(held[start - base:stop - base])
            if stop <= start:
                return ()
            return (*self._older(start, min(stop, base)), *held[:max(stop - base, 0)])
        if index < 0:
            index += base + len(held)
        if index >= base:
            return held[index - base]
        if index < 0:
            raise IndexError("session event index out of range")
        return self._older(index, index + 1)[0]

    def __len__(self) -> int:
        base, held = self._held.window
        return base + len(held)

    def __iter__(self) -> Iterator[Event]:
        base, held = self._held.window
        if base:
            return self._iter_from_store(base, held)
        return iter(held)

    def _iter_from_store(self, base: int, held: list[Event]) -> Iterator[Event]:
        yield from self._older(0, base)
        yield from held

    def __reversed__(self) -> Iterator[Event]:
        """Backwards from the end, reading the store only when a reader gets past the tail held in memory (one
        read, not one per event)."""
        base, held = self._held.window
        yield from reversed(held)
        if base:
            yield from reversed(self._older(0, base))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        base, held = self._held.window
        return f"EventLog({base + len(held)} events)"


class Session:
    """One agent's log. ``seq`` is the next seq (the log length); ``events`` is the read-only log."""

    def __init__(self, session_id: str, *, header: Mapping[str, Any] | None = None,
                 store: SessionStore | None = None, clock: Callable[[], int] = now_ms) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("a session id must be a non-empty string")
        self.id = session_id
        self.header: dict[str, Any] = dict(header or {})
        self._held = Held(session_id)
        self._keep = 0
        self._stored = -1
        self.events = EventLog(self._held)
        self._store = store
        self._clock = clock
        self._publishing = False
        self._preface: Callable[[], object] | None = None
        self.closed = False
        self.extensions: dict[object, Any] = {}
        """Per-session state owned by services (keyed by the service object), e.g. projection cells."""
        self.first_live_seq = 0
        """The seq of the first event appended here rather than restored: what came before is history this process
        did not log (a resume's seed), which observers such as telemetry must not report as new."""

    @property
    def seq(self) -> int:
        base, held = self._held.window
        return base + len(held)

    @property
    def held(self) -> int:
        """How many events this session holds in memory (its whole log, unless :meth:`bound`)."""
        return len(self._held.window[1])

    def bound(self, keep: int, read_back: ReadBack) -> None:
        """Hold about ``keep`` to ``2 * keep`` recent events in memory, no more, once the older ones are stored
        (:meth:`stored`); ``events`` reads those back with ``read_back`` when asked for them.

        Why: one MCP connection is one session, open for as long as its client runs (days, for an editor), and every
        call logs six events: a session holding its whole log grew about 5 MiB per 1,000 calls. What the live
        machinery needs is recent (the projections fold each event as it is logged, the turn writer looks back to
        the current turn's last boundary), so only the rare whole-log reader pays for the read."""
        if keep < 1:
            raise ValueError("a session bound must keep at least one event")
        self._keep, self._held.read_back = keep, read_back

    def stored(self, through_seq: int) -> None:
        """The events through seq ``through_seq`` are durable in the store :meth:`bound`'s ``read_back`` reads:
        a bounded session may let go of them. Safe from any thread (one attribute write)."""
        if through_seq > self._stored:
            self._stored = through_seq

    @property
    def store(self) -> SessionStore | None:
        """The ``sessions`` service this session is live in (``None`` for a detached one)."""
        return self._store

    @property
    def publishing(self) -> bool:
        """Whether an append is telling its listeners about the last event right now (it is in the log, and the
        listeners after the current one have not heard of it yet)."""
        return self._publishing

    @property
    def format_version(self) -> int:
        """The log format this session's events are shaped for: its stored header's, else the one new logs are
        written in (a ``tool/result`` message differs between v0 and v4)."""
        version = self.header.get("version", LOG_FORMAT_VERSION)
        return version if type(version) is int else LOG_FORMAT_VERSION

    @property
    def cwd(self) -> str | None:
        cwd = self.header.get("cwd")
        return cwd if isinstance(cwd, str) else None

    def preface(self, write: Callable[[], object] | None) -> None:
        """Have the next append call ``write()`` first, once: after the append's own checks passed, before its
        event is numbered, so what ``write`` appends comes just before that event (``None`` withdraws it).

        How the turn writer opens a turn only for a call that logs something (:meth:`Turns.call_alone`): the call's
        ``turn/start`` … ``tool/call`` are written when its tool makes its first append, and not at all when the tool
        refuses the call without one, so the tool runs once, and every observer sees the events as they are logged.
        """
        self._preface = write

    def append(self, event_type: str | None = None, /, data: Any = _NO_DATA, *, surface_op: str | None = None,
               source_event_seqs: Iterable[int] | None = None, ignorable: bool = False, **renamed: Any) -> Event:
        """Log one event; returns it. Raises (and logs nothing) on bad input or an invariant veto.

        ``data`` is copied into frozen containers, refusing what JSON cannot carry losslessly or what nests deeper
        than a log line may hold, unless a checked constructor made it (:class:`~.frozen.CheckedDict`): that is
        proven and shared. An unchecked frozen container is copied like any other data.

        The event's type comes first, by position; ``type=`` (the keyword DESIGN.md named before the parameter
        stopped shadowing the builtin) is still taken, and nothing else is (decision 0050)."""
        if renamed:
            event_type = _renamed_type(event_type, renamed)
        if data is _NO_DATA:
            raise TypeError("append() missing required argument: 'data'")
        if self._publishing:
            raise SessionAppendError("session append cannot reenter while another append is being published")
        if self.closed:
            raise SessionAppendError(f'session "{self.id}" is closed')
        if not isinstance(event_type, str) or not event_type:
            raise SessionAppendError("session event type must be a non-empty string")
        if event_type in SURFACE_EVENT_TYPES:
            if surface_op is None:
                raise SessionAppendError(f'session event "{event_type}" is surface-eligible and must carry surfaceOp')
            if surface_op.__class__ is not str:
                raise SessionAppendError(f'session event "{event_type}" surfaceOp must be a string')
        elif surface_op is not None:
            raise SessionAppendError(f'session event "{event_type}" is not surface-eligible and cannot carry surfaceOp')
        frozen = data if data.__class__ is CheckedDict else lossless_data(event_type, data)
        if self._preface is not None:
            write, self._preface = self._preface, None
            write()
            if self.closed:
                raise SessionAppendError(f'session "{self.id}" is closed')
        base, events = self._held.window
        event = FrozenDict(type=event_type, seq=base + len(events), time=self._clock(), data=frozen)
        if source_event_seqs is not None:
            dict.__setitem__(event, "sourceEventSeqs", FrozenList([int(s) for s in source_event_seqs]))
        if surface_op is not None:
            dict.__setitem__(event, "surfaceOp", surface_op)
        if ignorable:
            dict.__setitem__(event, "ignorable", True)
        store = self._store
        self._publishing = True
        try:
            if store is not None:
                for observer in store.observers:
                    observer(self, event)
            events.append(event)
            if store is not None:
                for listener in store.listeners:
                    try:
                        listener(self, event)
                    except Exception:
                        log.warning("session/event listener failed on %s seq %s", event["type"], event["seq"],
                                    exc_info=True)
        finally:
            self._publishing = False
        if self._keep and len(events) > 2 * self._keep:
            self._cut(base, events)
        return event

    def _cut(self, base: int, events: list[Event]) -> None:
        """Let go of the stored events before the last ``keep``, when that frees at least ``keep`` of them (so the
        copy of the tail it costs is paid once per ``keep`` appends, not on each while the store lags behind)."""
        cut = min(self._stored + 1, base + len(events) - self._keep) - base
        if cut >= self._keep:
            self._held.window = (base + cut, events[cut:])

    def restore(self, events: Iterable[Mapping[str, Any]]) -> None:
        """Seed an empty session with events read from storage (no observers, no listeners: they are history)."""
        if self.seq:
            raise SessionAppendError(f'session "{self.id}" already has events; restore needs an empty log')
        held = self._held.window[1]
        for expected, event in enumerate(events):
            if event.get("seq") != expected:
                raise SessionAppendError(f"restored event {expected} has seq {event.get('seq')!r}")
            held.append(event if isinstance(event, FrozenDict) else freeze_trusted(dict(event)))
        self.first_live_seq = len(held)

    def __repr__(self) -> str:
        return f"<Session {self.id!r} seq={self.seq}>"


class SessionStore:
    """The ``sessions`` service: live sessions plus the pre-commit observers and post-commit listeners."""

    def __init__(self, clock: Callable[[], int] = now_ms) -> None:
        self._sessions: dict[str, Session] = {}
        self.observers: list[Observer] = []
        self.listeners: list[Observer] = []
        self._on_open: list[Callable[[Session], object]] = []
        self._on_close: list[Callable[[Session], object]] = []
        self._on_agent_error: list[AgentErrorHook] = []
        self.clock = clock

    def create(self, session_id: str, *, cwd: str | None = None, **header: Any) -> Session:
        """A new, empty session. Raises if one with this id is already live."""
        if session_id in self._sessions:
            raise ValueError(f'session "{session_id}" already exists')
        fields: dict[str, Any] = {"createdAt": self.clock()}
        if cwd is not None:
            fields["cwd"] = cwd
        fields.update(header)
        session = Session(session_id, header=fields, store=self, clock=self.clock)
        self._adopt(session)
        return session

    def adopt(self, session: Session) -> Session:
        """Make a restored session live in this store (used by persistence after a load)."""
        if session.id in self._sessions:
            raise ValueError(f'session "{session.id}" already exists')
        session._store = self
        session._clock = self.clock
        self._adopt(session)
        return session

    def _adopt(self, session: Session) -> None:
        self._sessions[session.id] = session
        try:
            for hook in list(self._on_open):
                hook(session)
        except BaseException:  # e.g. persistence refused it (another writer holds the log): it never went live
            del self._sessions[session.id]
            session.closed = True
            raise

    def get(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def list(self) -> list[Session]:
        return list(self._sessions.values())

    def close(self, session_id: str) -> None:
        """End a live session: no more appends; ``on_close`` hooks run (persistence flushes and unlocks)."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        session.closed = True
        for hook in list(self._on_close):
            try:
                hook(session)
            except Exception:
                log.warning("on_close hook failed for session %s", session_id, exc_info=True)

    def observe(self, observer: Observer) -> Disposer:
        """Run ``observer(session, event)`` before each commit; raising vetoes the append."""
        return _add(self.observers, observer)

    def listen(self, listener: Observer) -> Disposer:
        """Run ``listener(session, event)`` after each commit; failures are logged."""
        return _add(self.listeners, listener)

    def on_open(self, hook: Callable[[Session], object]) -> Disposer:
        """Run ``hook(session)`` whenever a session becomes live (created or adopted); raising refuses it."""
        return _add(self._on_open, hook)

    def on_close(self, hook: Callable[[Session], object]) -> Disposer:
        """Run ``hook(session)`` after a session is closed."""
        return _add(self._on_close, hook)

    def on_agent_error(self, hook: AgentErrorHook) -> Disposer:
        """Run ``hook(agent_id, session, turn, step, error)`` when an agent's turn fails (:meth:`agent_error`)."""
        return _add(self._on_agent_error, hook)

    def agent_error(self, agent_id: str, session: Session, turn: int, step: int, error: BaseException) -> None:
        """Tell the hooks that an agent's turn failed: the live signal the log has no event for (its ``turn/end``
        says *that* it failed; operators alert on this). Hook failures are logged, never raised into the agent."""
        for hook in list(self._on_agent_error):
            try:
                hook(agent_id, session, turn, step, error)
            except Exception:
                log.warning("agent error hook failed for session %s", session.id, exc_info=True)

    def forget(self) -> None:
        """Close and let go of every session (the service is being disposed); whoever holds one can still read it.

        Closed, because nothing would persist or project an event appended from now on: the append is refused
        rather than answered as if it were logged. Let go, because a live session refers to its store and the store
        to it: without this, a disposed runtime's sessions, and every event they logged, stayed in memory until a
        full collection happened to run, which a process that only reads logs afterwards may never do. A benchmark
        that wrote 1M events kept 1 GB for its whole run, and read logs 15-25% slower in it.
        """
        for session in self._sessions.values():
            session.closed = True
        self._sessions.clear()


SESSIONS: Final[ServiceKey[SessionStore]] = ServiceKey("sessions")
"""The session store's key: ``ctx[SESSIONS]``."""


def _add(items: list[Any], item: Any) -> Disposer:
    items.append(item)

    def remove() -> None:
        if item in items:
            items.remove(item)

    return Disposer(remove)


def apply(ctx: Context) -> None:
    store = SessionStore()
    ctx.on_dispose(store.forget)  # last: after the service is withdrawn and whatever injected it has unwound
    ctx.provide(SESSIONS, store)
