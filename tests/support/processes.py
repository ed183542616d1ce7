"""Helpers for the tests that run a Spark standalone cluster in child processes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path


def tail(path: Path, chars: int = 4000) -> str:
    """The end of a log, without Java stack frames."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"<{exc}>"
    return "\n".join(line for line in lines if not line.startswith("\tat "))[-chars:]


def stop(proc: subprocess.Popen[bytes]) -> None:
    """End a process started in its own session, and its children (executors, Python workers)."""
    for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
