"""The anonymous user id a telemetry backend reports as the resource's ``user.id``: DSH's file, shared with DSH.

A random UUID kept as one bare line in ``$DSH_HOME/.anonymous-user-id`` (``~/.dsh`` without ``DSH_HOME``), the very
file DeepSeek Harness keeps, so a person who runs both is one id to whoever receives the telemetry. Never derived
from anything about the machine or the person; deleting the file starts a new identity at the next launch. Read once
per process and file; created with an exclusive write, so two processes starting together settle on one id (the
loser rereads the winner's); an unwritable home still gets an id for this run: telemetry is never blocked on it.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

FILE_NAME: Final = ".anonymous-user-id"

_UUID: Final = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)

_memo: dict[Path, str] = {}


def dsh_home(env: Mapping[str, str] | None = None) -> Path:
    """``$DSH_HOME``, else ``~/.dsh``."""
    home = (os.environ if env is None else env).get("DSH_HOME")
    return Path(home) if home else Path.home() / ".dsh"


def _read(file: Path) -> str | None:
    try:
        text = file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if _UUID.match(text) else None


def anonymous_user_id(env: Mapping[str, str] | None = None,
                      new_id: Callable[[], str] = lambda: str(uuid.uuid4())) -> str:
    """This harness home's anonymous id, created and kept on first use."""
    file = dsh_home(env) / FILE_NAME
    known = _memo.get(file)
    if known is not None:
        return known
    found = _read(file)
    if found is None:
        created = new_id()
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            with file.open("x", encoding="utf-8") as handle:
                handle.write(created + "\n")
            found = created
        except OSError:  # another process won (reread its id), the file is corrupt, or the home is read-only
            found = _read(file)
            if found is None:
                with contextlib.suppress(OSError):  # unwritable: the id is kept for this run only
                    file.write_text(created + "\n", encoding="utf-8")
                found = created
    _memo[file] = found
    return found
