"""The invariant registry (``@deepseek-ai/dsh-invariants``): companions that check every event before it commits.

A companion registers under its package name with a check ``(session, event) -> None`` that raises
:class:`InvariantViolation` with a plain text; the registry prefixes the package (``invariant violated by "<pkg>":``)
and turns it into a veto: the append raises and nothing is logged. At registration it first checks every event
already in every live session, so a companion never silently accepts a history it would have refused.
Allow/block lists (regular expressions, a block match wins) filter which packages' checks run; names stay reserved
either way.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from dsh_todo.harness.context import Context, Disposer, ServiceKey
from dsh_todo.harness.errors import ConfigError, InvariantError
from dsh_todo.harness.errors import InvariantViolation as InvariantViolation
from dsh_todo.harness.event_types import Event
from dsh_todo.harness.session import SESSIONS, Session, SessionStore

name = "@deepseek-ai/dsh-invariants"
inject = ["sessions"]

EventCheck = Callable[[Session, Event], None]
SessionCheck = Callable[[Session], None]




@dataclass(frozen=True)
class Config:
    enabled: bool = True
    package_allowlist: tuple[str, ...] = ()
    package_blocklist: tuple[str, ...] = ()

    @classmethod
    def parse(cls, raw: Any) -> Config:
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise ConfigError("invalid config:\n  - $ expected object")
        enabled = raw.get("enabled", True)
        if type(enabled) is not bool:
            raise ConfigError("invalid config:\n  - $.enabled expected boolean (at enabled)")
        lists: dict[str, tuple[str, ...]] = {}
        for key in ("package_allowlist", "package_blocklist"):
            value = raw.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"invalid config:\n  - $.{key} expected array of strings (at {key})")
            for pattern in value:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ConfigError(f"invalid config:\n  - $.{key} has a bad pattern {pattern!r}: {exc}") from None
            lists[key] = tuple(value)
        return cls(enabled, lists["package_allowlist"], lists["package_blocklist"])


@dataclass
class _Companion:
    package: str
    check_event: EventCheck
    check_session: SessionCheck | None = None
    live: bool = field(default=False)


class InvariantRegistry:
    """The ``invariants`` service."""

    def __init__(self, sessions: SessionStore, config: Config | None = None) -> None:
        self._sessions = sessions
        self.config = config or Config()
        self._companions: dict[str, _Companion] = {}

    def enabled_for(self, package: str) -> bool:
        if not self.config.enabled:
            return False
        if any(re.search(p, package) for p in self.config.package_blocklist):
            return False
        allow = self.config.package_allowlist
        return not allow or any(re.search(p, package) for p in allow)

    def register(self, package: str, check_event: EventCheck,
                 check_session: SessionCheck | None = None) -> Disposer:
        """Reserve ``package``; if its checks are enabled, verify live history, then veto bad appends."""
        if package in self._companions:
            raise ValueError(f'invariants: package "{package}" is already registered')
        companion = _Companion(package, check_event, check_session)
        self._companions[package] = companion
        remove_observer: Disposer | None = None
        if self.enabled_for(package):
            try:
                for session in self._sessions.list():
                    self._guard(companion, functools.partial(self._check_history, companion, session))
            except BaseException:
                del self._companions[package]
                raise
            remove_observer = self._sessions.observe(
                lambda session, event: self._guard(companion, lambda: check_event(session, event)))
            companion.live = True

        def unregister() -> None:
            if remove_observer is not None:
                remove_observer()
            self._companions.pop(package, None)

        return Disposer(unregister)

    @staticmethod
    def _check_history(companion: _Companion, session: Session) -> None:
        if companion.check_session is not None:
            companion.check_session(session)
            return
        for event in session.events:
            companion.check_event(session, event)

    @staticmethod
    def _guard(companion: _Companion, run: Callable[[], None]) -> None:
        try:
            run()
        except InvariantViolation as exc:
            raise InvariantError(companion.package, str(exc)) from None

    def packages(self) -> list[str]:
        return list(self._companions)


INVARIANTS: Final[ServiceKey[InvariantRegistry]] = ServiceKey("invariants")
"""The invariant registry's key: ``ctx[INVARIANTS]``."""


def apply(ctx: Context, config: Config) -> None:
    ctx.provide(INVARIANTS, InvariantRegistry(ctx[SESSIONS], config))
