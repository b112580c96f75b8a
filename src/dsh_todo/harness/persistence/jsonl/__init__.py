"""DSH's JSONL session logs on disk, raw or zstd: one backend of the persistence contract.

From the bytes up: :mod:`.paths`, :mod:`.chunk_rows`, :mod:`.zstd`, :mod:`.scan` with its bulk proof (:mod:`.bulk`),
:mod:`.reading` (the one exact pass, which :mod:`.follow` continues), :mod:`.lock`, :mod:`.writer`,
:mod:`.checkpoint`, :mod:`.backend` and :mod:`.plugin`. Nothing is imported here: a reader imports what it reads with.
"""

__all__: list[str] = []
