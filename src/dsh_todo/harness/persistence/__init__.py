"""Session persistence: one contract (:mod:`.contract`; what a backend writes, :mod:`.recorder`), one service
(:mod:`.service`), and one folder per backend, each registered in the entry point group ``dsh_todo.backends``
(:mod:`.registry`): DSH's JSONL logs on disk (:mod:`.jsonl`, raw or zstd, with DSH's crash recovery, SPEC §5.5),
PostgreSQL (:mod:`.postgres`) and an in-memory store for tests (:mod:`.memory`).

Beside them, shared by every backend: :mod:`.header`, :mod:`.repair`, :mod:`.batching`, :mod:`.checkpoints` (a
plugin of its own). Exported here: the contract and the errors, what a front door needs; a backend is imported from
its own folder.
"""

from dsh_todo.harness.persistence.contract import (
    Batch,
    LoadedLog,
    LogBackend,
    LogReader,
    LogWriter,
    Scan,
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
    SessionLogChangedError,
    SessionLogError,
    SessionNotFoundError,
    SessionWriteError,
)
from dsh_todo.harness.persistence.header import SESSION_FORMAT_VERSION
from dsh_todo.harness.persistence.repair import interrupted_turn_closers

__all__ = [
    "SESSION_FORMAT_VERSION",
    "Batch",
    "CorruptSessionLogError",
    "LoadedLog",
    "LogBackend",
    "LogReader",
    "LogWriter",
    "Scan",
    "SessionExistsError",
    "SessionFormatUnsupportedError",
    "SessionIdError",
    "SessionLockedError",
    "SessionLogChangedError",
    "SessionLogError",
    "SessionNotFoundError",
    "SessionPersistence",
    "SessionWriteError",
    "StoredLog",
    "StoredSession",
    "TornTail",
    "interrupted_turn_closers",
]
