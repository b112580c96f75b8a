"""``sourceEventSeqs`` as format v4 stores it: a run of three or more consecutive seqs as one ``[start, end]`` pair.

Events carry the expanded list in memory (as DSH's do); only the stored line is compact. :func:`compact` is what a
writer stores, :func:`expand` what a reader gives back, with DSH's checks: every entry a safe count below the
event's own seq, unique, and strictly increasing once a range appears. A list that is not strictly increasing is
stored as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from dsh_todo.harness.persistence.header import is_safe_count


def compact(seqs: Sequence[int]) -> list[Any]:
    """The stored form of ``seqs``: runs of three or more as ``[start, end]``, a run of two as its two members."""
    if any(later <= earlier for earlier, later in pairwise(seqs)):
        return list(seqs)
    stored: list[Any] = []
    index = 0
    while index < len(seqs):
        start = end = seqs[index]
        while index + 1 < len(seqs) and seqs[index + 1] == end + 1:
            index += 1
            end += 1
        if end - start >= 2:
            stored.append([start, end])
        else:
            stored.extend(range(start, end + 1))
        index += 1
    return stored


def expand(stored: object, seq: int) -> list[Any]:
    """The seqs ``stored`` stands for in the event at ``seq``; ``ValueError`` with DSH's reason when it is not a
    valid stored list. A list without ranges comes back as it is (its members are the event's business)."""
    if type(stored) is not list:
        raise ValueError("sourceEventSeqs must be an array")
    if not any(type(entry) is list for entry in stored):
        return stored
    seqs: list[Any] = []
    for entry in stored:
        if type(entry) is not list:
            if not is_safe_count(entry):
                raise ValueError("sourceEventSeqs member must be a non-negative safe integer")
            seqs.append(int(entry))
            continue
        if len(entry) != 2:
            raise ValueError("sourceEventSeqs range must be a [start, end] pair")
        start, end = entry
        if not (is_safe_count(start) and is_safe_count(end)):
            raise ValueError("sourceEventSeqs range bounds must be non-negative safe integers")
        if start > end or end >= seq or end - start + 1 > seq - len(seqs):
            raise ValueError("sourceEventSeqs range exceeds its event seq")
        seqs.extend(range(int(start), int(end) + 1))
    if any(source >= seq for source in seqs) or len(set(seqs)) != len(seqs):
        raise ValueError("sourceEventSeqs ranges must contain unique earlier seqs")
    if any(later <= earlier for earlier, later in pairwise(seqs)):
        raise ValueError("sourceEventSeqs ranges must be strictly increasing")
    return seqs
