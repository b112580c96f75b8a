"""How any persistence backend's service is hooked to the ``sessions`` service: one place for both plugins."""

from __future__ import annotations

from typing import Any

from dsh_todo.harness.context import Context


def install(ctx: Context, service: Any) -> None:
    """Persist every live session (those already open too), release on close, provide and dispose the service."""
    sessions = ctx.sessions
    sessions.on_open(service.attach)
    sessions.on_close(lambda session: service.release(session.id))
    sessions.listen(service.record)
    for session in sessions.list():
        service.attach(session)
    ctx.provide("session_persistence", service)
    ctx.on_dispose(service.close)
