"""The invariant registry (SPEC §7 "Registry behaviour") and the session companion's turn rule (SPEC §2.4)."""

from __future__ import annotations

from typing import Any

import pytest

import dsh_todo.harness.invariants as invariants_plugin
import dsh_todo.harness.session_invariant as session_invariant
from dsh_todo.harness.errors import ConfigError, InvariantError
from dsh_todo.harness.invariants import Config, InvariantRegistry, InvariantViolation
from dsh_todo.harness.session import Event, Session, SessionStore
from tests.conftest import BootFactory

OUTSIDE = ('invariant violated by "@deepseek-ai/dsh-session": {kind} appended outside any open turn '
           "(core execution events must be turn-enclosed)")


def refuse_kind(kind: str) -> Any:
    def check(_session: Session, event: Event) -> None:
        if event["type"] == kind:
            raise InvariantViolation(f"no {kind} allowed")

    return check


def test_a_package_name_is_registered_once() -> None:
    registry = InvariantRegistry(SessionStore())
    stop = registry.register("@acme/pkg", refuse_kind("x"))
    with pytest.raises(ValueError) as caught:
        registry.register("@acme/pkg", refuse_kind("y"))
    assert str(caught.value) == 'invariants: package "@acme/pkg" is already registered'
    stop()
    registry.register("@acme/pkg", refuse_kind("y"))
    assert registry.packages() == ["@acme/pkg"]


def test_a_violation_vetoes_the_append_with_the_package_prefix() -> None:
    store = SessionStore()
    registry = InvariantRegistry(store)
    registry.register("@acme/pkg", refuse_kind("custom/bad"))
    session = store.create("s")
    session.append("custom/good", {})
    with pytest.raises(InvariantError) as caught:
        session.append("custom/bad", {})
    error = caught.value
    assert str(error) == 'invariant violated by "@acme/pkg": no custom/bad allowed'
    assert (error.name, error.code, error.package_name) == ("InvariantError", "INVARIANT", "@acme/pkg")
    assert session.seq == 1


def test_registration_checks_every_live_session() -> None:
    store = SessionStore()
    store.create("clean").append("custom/good", {})
    store.create("dirty").append("custom/bad", {})
    registry = InvariantRegistry(store)
    with pytest.raises(InvariantError) as caught:
        registry.register("@acme/pkg", refuse_kind("custom/bad"))
    assert str(caught.value) == 'invariant violated by "@acme/pkg": no custom/bad allowed'
    assert registry.packages() == []
    assert store.observers == []


@pytest.mark.parametrize(("raw", "message"), [
    pytest.param({"enabled": "yes"}, "invalid config:\n  - $.enabled expected boolean (at enabled)", id="enabled"),
    pytest.param({"package_allowlist": "x"},
                 "invalid config:\n  - $.package_allowlist expected array of strings (at package_allowlist)",
                 id="allowlist"),
    pytest.param({"package_blocklist": [1]},
                 "invalid config:\n  - $.package_blocklist expected array of strings (at package_blocklist)",
                 id="blocklist"),
    pytest.param([], "invalid config:\n  - $ expected object", id="not-an-object"),
])
def test_registry_config_errors(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Config.parse(raw)
    assert str(caught.value) == message


def test_registry_config_defaults() -> None:
    assert Config.parse(None) == Config(True, (), ())
    assert Config.parse({}) == Config(True, (), ())
    assert invariants_plugin.inject == ["sessions"]


@pytest.mark.parametrize("kind", sorted(session_invariant.TURN_ENCLOSED))
def test_core_events_must_be_turn_enclosed(make_ctx: BootFactory, kind: str) -> None:
    ctx = make_ctx(invariants={}, session_invariant=True)
    session = ctx.sessions.create("s")
    surface = "append" if kind in ("tool/result", "assistant/message") else None
    with pytest.raises(InvariantError) as caught:
        session.append(kind, {}, surface_op=surface)
    assert str(caught.value) == OUTSIDE.format(kind=kind)
    session.append("turn/start", {"turn": 1})
    session.append(kind, {}, surface_op=surface)
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    with pytest.raises(InvariantError):
        session.append(kind, {}, surface_op=surface)
    assert session.seq == 3


def test_session_companion_rejects_an_existing_bad_history(make_ctx: BootFactory) -> None:
    ctx = make_ctx(invariants={})
    session = ctx.sessions.create("s")
    session.append("todo/write", {"todos": []})
    with pytest.raises(InvariantError) as caught:
        ctx.plugin(session_invariant)
    assert str(caught.value) == OUTSIDE.format(kind="todo/write")


def test_session_companion_accepts_a_good_history(make_ctx: BootFactory) -> None:
    ctx = make_ctx(invariants={})
    session = ctx.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("todo/write", {"todos": []})
    handle = ctx.plugin(session_invariant)
    assert handle.active
    session.append("todo/write", {"todos": []})
    assert session.seq == 4
