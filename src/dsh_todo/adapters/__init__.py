"""``todo_write`` inside the Python agent frameworks people already use.

Each adapter is a thin translation over :mod:`dsh_todo.adapters.common` (one registry, one session log), imported
only by the user who wants it, so the core never depends on a framework:

* :mod:`dsh_todo.adapters.openai_agents` — a ``FunctionTool`` for an OpenAI Agents SDK ``Agent``
  (extra ``openai-agents``);
* :mod:`dsh_todo.adapters.langchain` — a LangChain ``BaseTool`` (extra ``langchain``);
* :mod:`dsh_todo.adapters.pydantic_ai` — a pydantic-ai capability or toolset (extra ``pydantic-ai``);
* :mod:`dsh_todo.adapters.claude_agent_sdk` — an in-process MCP server for the Claude Agent SDK
  (extra ``claude-agent-sdk``).
* :mod:`dsh_todo.adapters.google_adk` — a Google ADK ``BaseTool`` (extra ``google-adk``);
* :mod:`dsh_todo.adapters.crewai` — a CrewAI ``BaseTool`` (no extra: ``pip install 'crewai>=1.15.30,<2'``).

This package imports no framework; ``from dsh_todo.adapters import bind_todo`` is always safe.
"""

from dsh_todo.adapters.common import TodoBinding, TurnScope, bind_todo, standing_plan

__all__ = ["TodoBinding", "TurnScope", "bind_todo", "standing_plan"]
