"""The minimal owning agent: an id and the session its tool calls write to."""

from __future__ import annotations

from dataclasses import dataclass

from dsh_todo.harness.session import Session


@dataclass(frozen=True)
class Agent:
    id: str
    session: Session
