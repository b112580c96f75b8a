"""The checkpoint's prefix proof: one SHA-256, whichever implementation hashes it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dsh_todo.harness.persistence.jsonl import checkpoint as prefix


@pytest.mark.parametrize("offset", [1, prefix.SMALL, prefix.SMALL + 1, prefix.PIECE + 7])
def test_the_proof_is_the_sha256_of_the_prefix_then_the_sealed_bytes(tmp_path: Path, offset: int) -> None:
    """Small prefixes are hashed by the interpreter's own SHA-256 (no OpenSSL to load), larger ones by OpenSSL; a
    reader and the writer's running hash must agree on every size."""
    log = tmp_path / "session.jsonl"
    log.write_bytes(bytes(range(256)) * (offset // 256 + 2))
    expected = hashlib.sha256(log.read_bytes()[:offset] + b"sealed").hexdigest()
    assert prefix.prefix_digest(log, offset, b"sealed") == expected
    assert prefix.running_digest(log, offset, b"sealed") == expected


def test_a_short_file_is_not_a_proof(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    log.write_bytes(b"abc")
    with pytest.raises(OSError, match="before the checkpoint's offset 10"):
        prefix.prefix_digest(log, 10, b"")
