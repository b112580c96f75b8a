"""Models the agent loop can drive: a scripted one for offline runs and tests, and any OpenAI-compatible endpoint.

``OpenAICompatibleModel`` imports the ``openai`` client only when one is constructed, so importing this
package stays cheap.
"""

from pathlib import Path

from dsh_todo.harness.llm.base import Model, ModelError, ModelReply, ModelRequest, ToolCallRequest
from dsh_todo.harness.llm.openai_compat import OpenAICompatibleModel
from dsh_todo.harness.llm.scripted import ScriptedModel, load_script, parse_script

__all__ = ["Model", "ModelError", "ModelReply", "ModelRequest", "OpenAICompatibleModel", "ScriptedModel",
           "ToolCallRequest", "load_script", "make_model", "parse_script"]


def make_model(script: str | None, model: str | None) -> Model:
    """The scripted model for ``--script FILE``, else the OpenAI-compatible endpoint ``model`` (needs
    ``DEEPSEEK_API_KEY``; the client is imported only when one is constructed). Raises :class:`ModelError` with a
    one-line reason."""
    if script:
        return ScriptedModel(load_script(script), model=Path(script).name)
    return OpenAICompatibleModel(model)
