"""Carry a format-v0 session log forward to format v4, the way DeepSeek Harness 0.2.1 does.

DSH 0.1.1 wrote session logs in format v0 (``session.jsonl[.zstd]``); DSH 0.2.1 writes format v4
(``session.v4.jsonl[.zstd]``) and, opening a v0 log, migrates it through every released format in turn:
v0→v1→v2→v3→v4. When we resume a v0 session we carry it forward the same way, so the v4 log we write is the one
DSH would have written from the same v0 log: :func:`upgrade_to_v4` returns DSH's v4 header record and events,
each a dict whose key order, dumped by :func:`dsh_todo.jsonutil.dumps`, gives DSH's exact line. The tests hold
that output to DSH's own export of the same logs, byte for byte (``tests/fixtures/dsh-v4-upgrade``).

The steps, each a pure pass over the whole log (DSH streams them; the result is the same):

* **v0→v1** normalises pre-release shapes: ``compact/*`` becomes ``compaction/*``; a ``turn/start`` trigger is
  dropped; ``turn/end`` reasons ``aborted`` (without a reason), ``disposed`` and flat ``error`` get their current
  shape; ``request/header`` loses ``messagePrefix``; ``steering/message`` becomes a ``user/message``; retries and
  compactions get their ids; legacy user, assistant and tool-result payloads become messages.
* **v1→v2** takes every ``assistant/chunk`` off the top level: the chunks of one attempt are compacted into the
  ``stream`` list of the ``assistant/message`` they produced (an attempt no message closed becomes an
  ``assistant/attempt``), a turn a restart left open gets ``turn/end {kind: "interrupted"}``, and every event is
  renumbered densely, its references to earlier seqs mapped with it.
* **v2→v3** moves the system prompt out of ``request/header`` into a ``system/message`` (an empty one after the
  first ``step/start``, a replacing one before each header whose prompt differs from the last), whose id is
  ``v2-to-v3-system-`` and the SHA-256 of its anchor; replace operations spell ``startSeq``/``endSeq``.
* **v3→v4** lifts each ``tool/result`` message to the first-class ``role: "tool"`` shape, turns plugin message
  sources into producer kinds (the system prompt's is ``system-prompt``) and namespaces unknown content tags.

What DSH refuses, this refuses too, with an :class:`UpgradeError` whose text is DSH's where DSH has one. Seeded
sessions (a ``seedLength`` header) are refused: nothing here writes one, and their inherited cut is not carried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dsh_todo.harness.persistence.upgrade.common import UpgradeError, decoded, encoded
from dsh_todo.harness.persistence.upgrade.lifecycle import Lifecycle
from dsh_todo.harness.persistence.upgrade.v0_to_v1 import v0_to_v1
from dsh_todo.harness.persistence.upgrade.v1_to_v2 import V1ToV2
from dsh_todo.harness.persistence.upgrade.v2_to_v3 import V2ToV3
from dsh_todo.harness.persistence.upgrade.v3_to_v4 import v3_to_v4
from dsh_todo.jsonutil import dumps

__all__ = ["UpgradeError", "upgrade_to_v4"]


def upgrade_to_v4(header: Mapping[str, Any],
                  events: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The v4 header record and events DSH 0.2.1 makes of a v0 log.

    ``header`` is the v0 header (its record, or the reader's metadata without ``type``); ``events`` are the log's
    events in order as our reader returns them, packed chunk rows expanded into ``assistant/chunk`` events. Nothing
    given is changed. Each returned dict, dumped by the canonical encoder, is DSH's line for it: the header line
    first, then one line per event.
    """
    if header.get("version") != 0:
        raise UpgradeError(f"expected a format v0 session header, got version {dumps(header.get('version'))}")
    if "seedLength" in header:
        raise UpgradeError("seeded sessions (seedLength) are not carried forward to format v4")
    session_id = header.get("id")
    if not isinstance(session_id, str):
        raise UpgradeError("the session header has no string id")
    v1 = v0_to_v1(session_id, [decoded(event) for event in events])
    v2 = V1ToV2().run(v1)
    v3 = V2ToV3(session_id).run(v2)
    v4 = v3_to_v4(v3)
    try:
        Lifecycle(v4).check()
    except UpgradeError as exc:
        raise UpgradeError(f"Session migration from v0 to v4 refuses the transformed artifact: {exc}") from None
    return _header_v4(header), [encoded(event) for event in v4]


def _header_v4(header: Mapping[str, Any]) -> dict[str, Any]:
    """The v4 header in DSH's key order: ``isSeeded`` before ``origin`` and ``delegationDepth``."""
    record: dict[str, Any] = {"type": "session", "version": 4, "id": header["id"], "createdAt": header["createdAt"]}
    for key in ("cwd", "parentSession"):
        if key in header:
            record[key] = header[key]
    record["isSeeded"] = False
    if "origin" in header:
        record["origin"] = header["origin"]
    record["delegationDepth"] = header["delegationDepth"]
    if "agentPreset" in header:
        record["agentPreset"] = "ptc" if header["agentPreset"] == "code" else header["agentPreset"]
    return record
