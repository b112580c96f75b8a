"""The README's Model Experience section quotes the text the model is sent, and its token counts, exactly."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dsh_todo.harness.llm.wire import function_tool, messages_tool
from dsh_todo.jsonutil import dumps
from dsh_todo.tokens import count_tokens
from dsh_todo.tool_todo import build_tool
from dsh_todo.tool_todo import description as text

DOC = Path(__file__).resolve().parents[1] / "README.md"
# DSH 0.2.1's tool JSON in the same two wrappings (parallel, single), measured with the same tokenizer.
REFERENCE = {"openai": (202, 192), "anthropic": (198, 188)}


def section() -> str:
    doc = DOC.read_text(encoding="utf-8")
    start = doc.index("## Model Experience\n")
    return doc[start:doc.index("\n## ", start + 1)]


def flat(words: str) -> str:
    return " ".join(words.split())


def counts(wrap: Callable[[Mapping[str, Any]], dict[str, Any]]) -> tuple[int, int]:
    """(parallel, single) tokens of the tool JSON in one wrapping."""
    parallel, single = (count_tokens(dumps(wrap(build_tool(allow).schema()))) for allow in (True, False))
    return parallel, single


def test_the_quote_is_the_parallel_text_as_sent() -> None:
    quoted = [line[2:] for line in section().splitlines() if line.startswith("> ")]
    assert " ".join(quoted) == text.describe(True)


def test_the_single_clause_and_the_parameter_texts_are_quoted() -> None:
    body = flat(section())
    for words in (text.SINGLE.strip(), text.TODOS_DESCRIPTION, text.CONTENT_DESCRIPTION, text.STATUS_DESCRIPTION):
        assert f"*{words}*" in body, words


def test_the_token_line_states_the_counts_and_ratios() -> None:
    body = flat(section())
    (parallel, single), (m_parallel, m_single) = counts(function_tool), counts(messages_tool)
    ref, ref_messages = REFERENCE["openai"], REFERENCE["anthropic"]
    assert f"**{parallel}** (parallel) and **{single}** (single) in the OpenAI function wrapping" in body
    assert f"against DSH 0.2.1's {ref[0]} and {ref[1]} for the same JSON" in body
    assert f"({parallel / ref[0]:.2f}× and {single / ref[1]:.2f}×) and 0.1.1's 318 and 294" in body
    assert re.search(rf"\*\*{m_parallel}\*\* and \*\*{m_single}\*\* in the Anthropic wrapping "
                     rf"`{{\"name\",\"description\",\"input_schema\"}}` \(DSH 0\.2\.1: {ref_messages[0]} and "
                     rf"{ref_messages[1]}\)", body)
