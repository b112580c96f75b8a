"""Models the agent loop can drive: a scripted one for offline runs and tests, and any OpenAI-compatible endpoint."""

from pathlib import Path

from dsh_todo.harness.llm.base import Model, ModelError, ModelReply, ModelRequest, ToolCallRequest
from dsh_todo.harness.llm.scripted import ScriptedModel

__all__ = ["Model", "ModelError", "ModelReply", "ModelRequest", "ScriptedModel", "ToolCallRequest", "make_model"]


def make_model(script: str | None, model: str | None) -> Model:
    """The scripted model for ``--script FILE``, else the OpenAI-compatible endpoint ``model`` (needs
    ``DEEPSEEK_API_KEY``; the client is imported only then). Raises :class:`ModelError` with a one-line reason."""
    from dsh_todo.harness.llm.scripted import load_script

    if script:
        return ScriptedModel(load_script(script), model=Path(script).name)
    from dsh_todo.harness.llm.openai_compat import OpenAICompatibleModel

    return OpenAICompatibleModel(model)
