"""A server a test or a benchmark started as a subprocess: stopping it (politely, then for sure) and watching what it
holds (memory and open file descriptors, from ``/proc``, so Linux only)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any


def stop(process: subprocess.Popen[Any], timeout: float = 20) -> int:
    """Send SIGINT (what a person's Ctrl-C sends, so the server shuts down as it would for them), wait up to
    ``timeout`` seconds, kill it if it is still there. Returns its exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def memory_kb(pid: int, field: str = "VmRSS") -> int:
    """A ``kB`` field of ``/proc/PID/status``: ``VmRSS`` (resident now) or ``VmHWM`` (its peak), in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def open_fds(pid: int) -> int:
    """How many file descriptors the process has open."""
    return len(os.listdir(f"/proc/{pid}/fd"))
