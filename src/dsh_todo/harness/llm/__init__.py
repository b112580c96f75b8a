"""Models the agent loop can drive: a scripted one for offline runs and tests, and any OpenAI-compatible endpoint."""

from dsh_todo.harness.llm.base import Model, ModelError, ModelReply, ModelRequest, ToolCallRequest
from dsh_todo.harness.llm.scripted import ScriptedModel

__all__ = ["Model", "ModelError", "ModelReply", "ModelRequest", "ScriptedModel", "ToolCallRequest"]
