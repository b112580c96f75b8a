"""DSH's JSONL session logs on disk, raw or zstd: one backend of the persistence contract.

From the bytes up: :mod:`.paths` (where a log lives), :mod:`.chunk_rows` (packed delta runs), :mod:`.zstd` (frames),
:mod:`.scan` (the good prefix and the crash-tail rules) with its bulk proof (:mod:`.bulk`), :mod:`.reading` (the one
exact pass over a log, forward, from a checkpoint, or backward to an open turn), :mod:`.follow` (reading on from
where the last read stopped), :mod:`.lock` (one writer per log), :mod:`.writer` (durable appends),
:mod:`.checkpoint` (``projections.json`` and its prefix proof), :mod:`.backend` (the backend) and :mod:`.plugin`
(the plugin). Nothing is imported here: a reader imports what it reads with.
"""

__all__: list[str] = []
