"""Services by typed key and by name (decision 0044): the context keeps them by name and imports none of them.

Each service module declares its key beside its class; ``ctx[KEY]`` is what our own code spells (mypy types it),
``ctx.tools`` (for the names DESIGN promises code outside dsh-todo) and ``ctx.get("tools")`` are the same lookup by
name.
"""

from __future__ import annotations

from typing import Any, assert_type

import pytest

import dsh_todo.harness.invariants as invariants
import dsh_todo.harness.persistence.contract as contract
import dsh_todo.harness.projections as projections
import dsh_todo.harness.session as session
import dsh_todo.harness.telemetry.service as telemetry
import dsh_todo.harness.tools.registry as registry
from dsh_todo.harness.context import Context, ServiceKey
from dsh_todo.testing import memory_context

MISSING = 'cannot get service "{}": it is not provided (is its plugin mounted?)'


class Clock:
    def __init__(self) -> None:
        self.ticks = 0


CLOCK: ServiceKey[Clock] = ServiceKey("clock")


def test_each_service_module_declares_the_key_of_the_name_design_gives_it() -> None:
    keys: list[ServiceKey[Any]] = [registry.TOOLS, session.SESSIONS, projections.SESSION_PROJECTIONS,
                                   invariants.INVARIANTS, contract.SESSION_PERSISTENCE, telemetry.SESSION_TELEMETRY]
    assert [key.name for key in keys] == ["tools", "sessions", "session_projections", "invariants",
                                          "session_persistence", "session_telemetry"]


def test_the_typed_key_and_the_name_reach_the_same_service() -> None:
    ctx = Context()
    clock = Clock()
    ctx.provide(CLOCK, clock)
    assert_type(ctx[CLOCK], Clock)
    assert_type(ctx.get(CLOCK), Clock | None)
    assert ctx[CLOCK] is ctx.get(CLOCK) is ctx["clock"] is ctx.get("clock") is clock
    assert ctx.has(CLOCK) and ctx.has("clock")


def test_the_standard_services_answer_to_their_design_names() -> None:
    with memory_context(invariants=True) as ctx:
        assert ctx.tools is ctx[registry.TOOLS]
        assert ctx.sessions is ctx[session.SESSIONS]
        assert ctx.session_projections is ctx[projections.SESSION_PROJECTIONS]
        assert ctx.invariants is ctx[invariants.INVARIANTS]
        assert isinstance(ctx[registry.TOOLS], registry.ToolRegistry)


def test_a_missing_service_fails_alike_by_key_and_by_name() -> None:
    """``ctx[KEY]`` raises the ``AttributeError`` ``ctx.tools`` always raised, so moving a caller from one spelling
    to the other changes nothing it catches."""
    ctx = Context()
    for get in (lambda: ctx[CLOCK], lambda: ctx["clock"]):
        with pytest.raises(AttributeError) as caught:
            get()
        assert str(caught.value) == MISSING.format("clock")
    with pytest.raises(AttributeError) as caught:
        _ = ctx.tools
    assert str(caught.value) == MISSING.format("tools")
    assert ctx.get(CLOCK) is None
    assert not hasattr(ctx, "sessions")


def test_a_key_provides_once_and_its_disposer_withdraws_it() -> None:
    ctx = Context()
    withdraw = ctx.provide(CLOCK, Clock())
    with pytest.raises(ValueError, match=r'^service "clock" is already provided$'):
        ctx.provide("clock", Clock())
    withdraw()
    assert not ctx.has(CLOCK)


def test_inject_takes_keys_and_names_alike() -> None:
    ctx = Context()
    started: list[int] = []
    ctx.inject([CLOCK, "sessions"], lambda scoped: started.append(scoped[CLOCK].ticks))
    ctx.provide(CLOCK, Clock())
    assert started == []
    ctx.plugin(session)
    assert started == [0]
    ctx.dispose()


def test_the_design_names_are_read_per_access_not_kept() -> None:
    """``ctx.tools`` follows the service table: withdrawn, then provided anew, it is the new service."""
    ctx = Context()
    first, second = object(), object()
    withdraw = ctx.provide("tools", first)
    assert ctx.tools is first
    withdraw()
    ctx.provide("tools", second)
    assert ctx.tools is second


def test_a_key_shows_its_name() -> None:
    assert repr(CLOCK) == "ServiceKey('clock')"
