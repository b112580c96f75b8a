"""Zstandard frames as DSH writes them: the header alone in frame one, then one frame per durable write batch.

Each frame is independently decodable, with a content checksum and no content size (frame descriptor ``0x04``), as
Node's ``zstdCompress`` writes at level 3 with ``ZSTD_c_checksumFlag``: the bundled libzstd makes our frames
byte-identical to DSH's. Frame boundaries are found structurally, without decompressing, so a crash that cut the last
frame (a torn tail, cut at the frame start) is told apart from a damaged complete frame (corruption).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Final, NamedTuple

import zstandard

from dsh_todo.harness.errors import FrameError as FrameError
from dsh_todo.harness.persistence.errors import CorruptSessionLogError
from dsh_todo.harness.persistence.jsonl.limits import MAX_WINDOW

MAGIC: Final = b"\x28\xb5\x2f\xfd"
LEVEL: Final = 3


class FrameScan(NamedTuple):
    """Complete frames as ``(start, end)`` byte ranges."""

    frames: list[tuple[int, int]]



def scan_frames(buffer: bytes, max_frames: int | None = None) -> FrameScan:
    """Locate complete frames without decompressing; raises :class:`CorruptSessionLogError` on bad structure."""
    frames: list[tuple[int, int]] = []
    size = len(buffer)
    offset = 0
    while offset < size:
        start = offset
        if size - offset < 4:
            return FrameScan(frames)
        if buffer[offset:offset + 4] != MAGIC:
            raise CorruptSessionLogError(f"corrupt Zstandard session log: invalid frame magic at byte {offset}")
        offset += 4
        if offset == size:
            return FrameScan(frames)
        descriptor = buffer[offset]
        offset += 1
        if descriptor & 0x18:
            raise CorruptSessionLogError(
                f"corrupt Zstandard session log: reserved frame-header bit at byte {offset - 1}")
        size_flag = descriptor >> 6
        single_segment = bool(descriptor & 0x20)
        dictionary_flag = descriptor & 0x03
        header_rest = ((0 if single_segment else 1)
                       + (4 if dictionary_flag == 3 else dictionary_flag)
                       + ((1 if single_segment else 0) if size_flag == 0 else 1 << size_flag))
        if size - offset < header_rest:
            return FrameScan(frames)
        offset += header_rest
        while True:
            if size - offset < 3:
                return FrameScan(frames)
            block = int.from_bytes(buffer[offset:offset + 3], "little")
            offset += 3
            block_type = (block >> 1) & 0x03
            if block_type == 0x03:
                raise CorruptSessionLogError(
                    f"corrupt Zstandard session log: reserved block type at byte {offset - 3}")
            payload = 1 if block_type == 0x01 else block >> 3
            if size - offset < payload:
                return FrameScan(frames)
            offset += payload
            if block & 1:
                break
        if descriptor & 0x04:
            if size - offset < 4:
                return FrameScan(frames)
            offset += 4
        frames.append((start, offset))
        if max_frames is not None and len(frames) >= max_frames:
            break
    return FrameScan(frames)


_local = threading.local()


def _compressor() -> zstandard.ZstdCompressor:
    """This thread's compressor. Making one allocates a compression context (about 20 µs, as much as compressing
    a whole turn), and a context must not be shared between threads: the writer thread and a caller's flush may
    compress at the same time for different sessions. So each thread keeps its own and reuses it."""
    compressor: zstandard.ZstdCompressor | None = getattr(_local, "compressor", None)
    if compressor is None:
        compressor = _local.compressor = zstandard.ZstdCompressor(level=LEVEL, write_checksum=True,
                                                                   write_content_size=False)
    return compressor


def compress_frame(plaintext: bytes) -> bytes:
    """One checksummed frame without content size, byte-identical to DSH's for the same plaintext."""
    # A streaming object per frame (cheap on a reused compressor): its frames carry no content size, as DSH's do;
    # the one-shot ``compress`` would set the single-segment flag instead.
    stream = _compressor().compressobj()
    return stream.compress(plaintext) + stream.flush()


def _libzstd_message(error: Exception) -> str:
    text = str(error)
    head, sep, rest = text.partition(": ")
    return rest if sep and "error" in head else text


def decode_frame(frame: bytes) -> bytes:
    """The plaintext of one structurally complete frame, checksum verified; raises :class:`FrameError`."""
    decoder = zstandard.ZstdDecompressor().decompressobj()
    try:
        plaintext = decoder.decompress(frame)
    except zstandard.ZstdError as exc:
        raise FrameError(_libzstd_message(exc)) from None
    if not decoder.eof:
        raise FrameError("frame ended before its last block")
    return plaintext


def decompressor() -> zstandard.ZstdDecompressor:
    """A decompressor with the bounded window (:data:`MAX_WINDOW`)."""
    return zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)


def frame_pieces(frame: bytes | memoryview, size: int,
                 dctx: zstandard.ZstdDecompressor | None = None) -> Iterator[bytes]:
    """The plaintext of one structurally complete frame in pieces of at most ``size`` bytes, checksum verified;
    raises :class:`FrameError`. Memory stays at one piece and one window (at most :data:`MAX_WINDOW`): a small file
    must not be able to ask for gigabytes. A pass decoding frame after frame passes its own ``dctx``
    (:func:`decompressor`): making one costs about 30 µs, more than decoding a small frame."""
    reader = (dctx or decompressor()).stream_reader(frame, read_across_frames=False)
    try:
        while piece := reader.read(size):
            yield piece
    except zstandard.ZstdError as exc:
        raise FrameError(_libzstd_message(exc)) from None


def prefix_pieces(data: bytes | memoryview, size: int) -> Iterator[bytes]:
    """Whatever plaintext the complete blocks of an incomplete final frame yield, in pieces of at most ``size``
    bytes. A crash mid-frame leaves whole blocks before the cut, whose lines were written and may be kept; a decoder
    failure here ends it quietly, never as corruption: the frame was never complete."""
    with contextlib.suppress(FrameError):
        yield from frame_pieces(data, size)
