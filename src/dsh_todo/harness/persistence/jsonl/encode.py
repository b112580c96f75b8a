"""Turning events into the bytes of one durable write (a batch of lines, or one zstd frame of them)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dsh_todo.harness.persistence.header import header_line
from dsh_todo.harness.persistence.jsonl.chunk_rows import pack_chunk_runs
from dsh_todo.harness.persistence.jsonl.paths import Compression
from dsh_todo.harness.persistence.jsonl.zstd import compress_frame
from dsh_todo.harness.persistence.seq_ranges import compact
from dsh_todo.jsonutil import dumps_bytes, dumps_lines


def batch_plaintext(events: Iterable[Mapping[str, Any]], *, pack_chunks: bool = True, ranges: bool = False) -> bytes:
    """The JSONL text of one batch, each record (a packed chunk row where possible, or an event verbatim) on its own
    ``\\n``-terminated line; with ``ranges`` (format v4), runs in ``sourceEventSeqs`` stored as ranges."""
    if ranges:
        events = [_ranged(event) for event in events]
    return dumps_lines(pack_chunk_runs(events) if pack_chunks else list(events))


def _ranged(event: Mapping[str, Any]) -> Mapping[str, Any]:
    seqs = event.get("sourceEventSeqs")
    if seqs is None or len(seqs) < 3:  # nothing to compact (a call's result names one call)
        return event
    return {**event, "sourceEventSeqs": compact(seqs)}


def header_plaintext(meta: Mapping[str, Any]) -> bytes:
    return dumps_bytes(header_line(meta)) + b"\n"


def encode_batch(events: Iterable[Mapping[str, Any]], compression: Compression, *, pack_chunks: bool = True,
                 ranges: bool = False) -> bytes:
    """The bytes appended to a log for one batch: plain lines, or exactly one zstd frame holding them."""
    plaintext = batch_plaintext(events, pack_chunks=pack_chunks, ranges=ranges)
    return compress_frame(plaintext) if compression == "zstd" else plaintext


def encode_header(meta: Mapping[str, Any], compression: Compression) -> bytes:
    """The first bytes of a log: the header line, in its own frame under zstd."""
    header = header_plaintext(meta)
    return compress_frame(header) if compression == "zstd" else header
