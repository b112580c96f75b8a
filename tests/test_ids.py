"""The one random UUID maker."""

from __future__ import annotations

import uuid

from dsh_todo.ids import random_uuid


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
