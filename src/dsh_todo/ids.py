"""Random identifiers: the one way the project makes a UUID (session ids, message ids, web request ids) and a tool
call id for a call that came without one.

A leaf module (the standard library only), so the harness, the carriers, the adapters and the commands share it
without depending on one another, and without importing :mod:`uuid` on the way.
"""

from __future__ import annotations

import os
from typing import Final


def random_uuid() -> str:
    """A random (version 4) UUID in its text form, as ``str(uuid.uuid4())`` writes it, at half the cost: 122 random
    bits, the version nibble ``4``, the variant nibble's two high bits ``10``."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


_VARIANT: Final = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def random_call_id(prefix: str = "call_") -> str:
    """A tool call id for a call its caller did not name: ``prefix`` and 24 random hex digits (96 bits)."""
    return prefix + os.urandom(12).hex()
