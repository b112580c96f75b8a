"""The one maker of random UUIDs and of tool call ids."""

from __future__ import annotations

import re
import uuid

from dsh_todo.ids import random_call_id, random_uuid


def test_random_uuids_are_version_4_as_uuid4_writes_them() -> None:
    """Session ids, ``tool/result`` message ids and web request ids are written as ``str(uuid.uuid4())`` writes
    them: version 4, RFC 4122 variant, lower-case hex in 8-4-4-4-12 groups, and the random bits really vary (each of
    the 122 takes both values)."""
    ids = [random_uuid() for _ in range(2000)]
    parsed = [uuid.UUID(text) for text in ids]
    assert all(str(u) == text for u, text in zip(parsed, ids, strict=True))
    assert all(u.version == 4 and u.variant == uuid.RFC_4122 for u in parsed)
    random = ((1 << 128) - 1) & ~((0xF000 << 64) | (0xC000 << 48))
    ones = zeros = 0
    for u in parsed:
        ones |= u.int
        zeros |= ~u.int
    assert ones & random == zeros & random == random
    assert len(set(ids)) == len(ids)


def test_random_call_ids_are_the_prefix_and_96_random_bits() -> None:
    ids = [random_call_id() for _ in range(2000)]
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", text) for text in ids)
    assert len(set(ids)) == len(ids)
    assert {text[5 + i] for text in ids for i in range(24)} == set("0123456789abcdef")  # no fixed digit anywhere
    assert re.fullmatch(r"call_mcp_[0-9a-f]{24}", random_call_id("call_mcp_"))
