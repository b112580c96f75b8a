"""What a reader's fold reads, told to the pass that reads a log for it, so storage need not know what folds read.

A pass that keeps no events may hand its observer less than every event (decision 0043): only the events of the
types the caller names, and what storage reads for itself (the turn boundaries and the open turn, from which
recovery's closers are computed). What an event *means* to a fold stays with the fold's owner: the todo tool's
rules say which events the standing plan reads and which one replaces it whatever came before
(:mod:`dsh_todo.tool_todo.rules`), and the log reader passes both here (:data:`dsh_todo.logview.plan.PLAN_INTEREST`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple


class Interest(NamedTuple):
    """The event types a fold reads (``types``), and, when the fold allows it, ``restarts``: whether an event of one
    of those types leaves the fold's answer independent of every event of those types before it (its state and the
    event it names as having last changed it are those of folding them all).

    With ``restarts``, a pass may leave out the wanted events before the last one it holds that restarts the fold;
    each event it leaves out is a whole envelope (a known type, an integer ``seq`` and ``data``), so a fold that
    takes every such envelope could not have refused it. Every other wanted event is handed over."""

    types: frozenset[str]
    restarts: Callable[[Mapping[str, Any]], bool] | None = None
