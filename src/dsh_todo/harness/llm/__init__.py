"""Models the agent loop can drive: a scripted one for offline runs and tests, and any OpenAI-compatible endpoint.

``OpenAICompatibleModel`` imports the ``openai`` client only when one is constructed, so importing this
package stays cheap.
"""

from dsh_todo.harness.llm.base import Model, ModelError, ModelReply, ModelRequest, ToolCallRequest
from dsh_todo.harness.llm.openai_compat import OpenAICompatibleModel
from dsh_todo.harness.llm.scripted import ScriptedModel, load_script, parse_script

__all__ = ["Model", "ModelError", "ModelReply", "ModelRequest", "OpenAICompatibleModel", "ScriptedModel",
           "ToolCallRequest", "load_script", "parse_script"]
