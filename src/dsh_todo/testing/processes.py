"""Stopping a server a test or a benchmark started as a subprocess: politely, then for sure."""

from __future__ import annotations

import signal
import subprocess
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
