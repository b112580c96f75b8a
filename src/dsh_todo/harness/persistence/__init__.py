"""DSH-compatible session logs on disk: JSONL, raw or zstd, with DSH's crash recovery (SPEC §5.5).

The pieces, from the bytes up: :mod:`.paths` (where a log lives), :mod:`.header` (its first line),
:mod:`.chunk_rows` (packed delta runs), :mod:`.scan` (the good prefix and the crash-tail rules), :mod:`.zstd`
(frames), :mod:`.repair` (closing an interrupted turn), :mod:`.lock` (one writer per log), :mod:`.logfile` (durable
appends), :mod:`.store` (the backend), :mod:`.batching` (write-behind) and :mod:`.jsonl` (the plugin); beside them,
:mod:`.checkpoints` (projection checkpoints, a plugin of its own) and :mod:`.fastscan` (the streaming plan scan).
"""

from dsh_todo.harness.persistence.chunk_rows import expand_row, pack_chunk_runs
from dsh_todo.harness.persistence.errors import (
    CorruptSessionLogError,
    SessionExistsError,
    SessionFormatUnsupportedError,
    SessionLockedError,
    SessionLogError,
    SessionNotFoundError,
    SessionWriteError,
)
from dsh_todo.harness.persistence.header import SESSION_FORMAT_VERSION
from dsh_todo.harness.persistence.logfile import LogWriter
from dsh_todo.harness.persistence.paths import encode_segment, project_key
from dsh_todo.harness.persistence.repair import interrupted_turn_closers
from dsh_todo.harness.persistence.store import JsonlStore, LoadedLog, StoredLog, StoredSession, TornTail

__all__ = [
    "SESSION_FORMAT_VERSION",
    "CorruptSessionLogError",
    "JsonlStore",
    "LoadedLog",
    "LogWriter",
    "SessionExistsError",
    "SessionFormatUnsupportedError",
    "SessionLockedError",
    "SessionLogError",
    "SessionNotFoundError",
    "SessionWriteError",
    "StoredLog",
    "StoredSession",
    "TornTail",
    "encode_segment",
    "expand_row",
    "interrupted_turn_closers",
    "pack_chunk_runs",
    "project_key",
]
