"""The tool runtime seam (``@deepseek-ai/dsh-tools``): schema DSL, validation, registry and execute pipeline."""

from dsh_todo.harness.tools.registry import (
    AbortSignal,
    ToolDefinition,
    ToolExecution,
    ToolRegistry,
    ToolResult,
    apply,
    define_tool,
    error_result,
    inject,
    name,
)

__all__ = ["AbortSignal", "ToolDefinition", "ToolExecution", "ToolRegistry", "ToolResult", "apply", "define_tool",
           "error_result", "inject", "name"]
