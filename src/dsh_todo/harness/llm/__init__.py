"""Models the agent loop can drive: a scripted one for offline runs and tests, and a model endpoint over one of two
wires, Anthropic Messages (DeepSeek as DSH 0.2 reaches it, the default) or OpenAI chat completions.

The endpoint adapters import their client (``anthropic``, ``openai``) only when one is constructed, so importing
this package stays cheap.
"""

import os
from pathlib import Path

from dsh_todo.harness.llm.base import Model, ModelError, ModelReply, ModelRequest, ToolCallRequest
from dsh_todo.harness.llm.messages import MessagesModel
from dsh_todo.harness.llm.openai_compat import OpenAICompatibleModel
from dsh_todo.harness.llm.scripted import ScriptedModel, load_script, parse_script

__all__ = ["Model", "ModelError", "ModelReply", "ModelRequest", "OpenAICompatibleModel", "ScriptedModel",
           "ToolCallRequest", "load_script", "make_model", "parse_script"]

WIRES = ("messages", "openai")
"""``--wire`` / ``DSH_TODO_WIRE``: ``messages`` (Anthropic Messages, the default) or ``openai`` (chat completions)."""


def choose_wire(wire: str | None) -> str:
    """``wire`` (the ``--wire`` option), else ``$DSH_TODO_WIRE``, else ``messages``: the wire DSH 0.2 speaks to
    DeepSeek. Never guessed from the base URL: the same host can serve both wires (DeepSeek does)."""
    chosen = wire or os.environ.get("DSH_TODO_WIRE") or "messages"
    if chosen not in WIRES:
        raise ModelError(f"unknown model wire {chosen!r} (--wire or DSH_TODO_WIRE): use messages or openai")
    return chosen


def make_model(script: str | None, model: str | None, wire: str | None = None) -> Model:
    """The scripted model for ``--script FILE``, else the endpoint ``model`` over the chosen wire
    (:func:`choose_wire`; needs ``DEEPSEEK_API_KEY``; the client is imported only when one is constructed). Raises
    :class:`ModelError` with a one-line reason."""
    if script:
        return ScriptedModel(load_script(script), model=Path(script).name)
    if choose_wire(wire) == "openai":
        return OpenAICompatibleModel(model)
    return MessagesModel(model)


def describe(model: Model) -> str:
    """``provider/model``, and for an endpoint the wire and where: what a front door prints when it starts."""
    wire, base_url = getattr(model, "wire", None), getattr(model, "base_url", None)
    name = f"{model.provider}/{model.model}"
    return f"{name} over {wire} at {base_url}" if wire and base_url else name
