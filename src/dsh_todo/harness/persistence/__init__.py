"""Session persistence: one contract (:mod:`.contract`), one service (:mod:`.service`), and DSH's JSONL logs on
disk (raw or zstd, with DSH's crash recovery, SPEC §5.5) as one backend of it; PostgreSQL is another
(:mod:`.postgres`), and :mod:`.memory` keeps logs in this process's memory (for tests).

The JSONL pieces, from the bytes up: :mod:`.paths` (where a log lives), :mod:`.header` (its first line),
:mod:`.chunk_rows` (packed delta runs), :mod:`.scan` (the good prefix and the crash-tail rules), :mod:`.zstd`
(frames), :mod:`.repair` (closing an interrupted turn), :mod:`.lock` (one writer per log), :mod:`.logfile` (durable
appends), :mod:`.checkpoint_file` (``projections.json``), :mod:`.jsonl_backend` (the backend) and :mod:`.jsonl`
(the plugin). Shared by every backend: :mod:`.batching` (write-behind), :mod:`.service` and :mod:`.checkpoints`
(projection checkpoints, a plugin of its own); beside them, :mod:`.fastscan` (the streaming plan scan).

Exported here: the contract a backend implements and a front door uses, the errors a read or a write can raise, the
JSONL backend and the service, where a log lives (``project_key``, ``encode_segment``), and the recovery rule every
backend shares (``interrupted_turn_closers``). The byte-level pieces stay in their modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_todo.harness.lazy import lazy_exports

if TYPE_CHECKING:
    from dsh_todo.harness.persistence.contract import (
        Batch,
        LoadedLog,
        LogBackend,
        LogWriter,
        SessionPersistence,
        StoredLog,
        StoredSession,
        TornTail,
    )
    from dsh_todo.harness.persistence.errors import (
        CorruptSessionLogError,
        SessionExistsError,
        SessionFormatUnsupportedError,
        SessionIdError,
        SessionLockedError,
        SessionLogError,
        SessionNotFoundError,
        SessionWriteError,
    )
    from dsh_todo.harness.persistence.header import SESSION_FORMAT_VERSION
    from dsh_todo.harness.persistence.jsonl_backend import JsonlBackend
    from dsh_todo.harness.persistence.memory import MemoryBackend
    from dsh_todo.harness.persistence.paths import encode_segment, project_key
    from dsh_todo.harness.persistence.repair import interrupted_turn_closers
    from dsh_todo.harness.persistence.service import PersistenceService

__all__ = [
    "SESSION_FORMAT_VERSION",
    "Batch",
    "CorruptSessionLogError",
    "JsonlBackend",
    "LoadedLog",
    "LogBackend",
    "LogWriter",
    "MemoryBackend",
    "PersistenceService",
    "SessionExistsError",
    "SessionFormatUnsupportedError",
    "SessionIdError",
    "SessionLockedError",
    "SessionLogError",
    "SessionNotFoundError",
    "SessionPersistence",
    "SessionWriteError",
    "StoredLog",
    "StoredSession",
    "TornTail",
    "encode_segment",
    "interrupted_turn_closers",
    "project_key",
]

_HOMES = {
    **dict.fromkeys(["Batch", "LoadedLog", "LogBackend", "LogWriter", "SessionPersistence", "StoredLog",
                     "StoredSession", "TornTail"], "contract"),
    **dict.fromkeys(["CorruptSessionLogError", "SessionExistsError", "SessionFormatUnsupportedError",
                     "SessionIdError", "SessionLockedError", "SessionLogError", "SessionNotFoundError",
                     "SessionWriteError"], "errors"),
    "SESSION_FORMAT_VERSION": "header", "JsonlBackend": "jsonl_backend", "MemoryBackend": "memory",
    "encode_segment": "paths", "project_key": "paths", "interrupted_turn_closers": "repair",
    "PersistenceService": "service",
}


__getattr__ = lazy_exports(__name__, _HOMES)
