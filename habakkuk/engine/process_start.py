"""When a process started: with its pid, what tells it from a later process given the
same pid (the pid files of scripts and commands that a killed Habakkuk left behind)."""

from __future__ import annotations

import os
import subprocess

_PS_TIMEOUT = 5.0


def process_start(pid: int) -> str | None:
    """When process `pid` started, as a token to compare (None: there is no such process).

    On Linux the start time in clock ticks since boot (/proc/PID/stat), elsewhere what
    `ps -o lstart=` prints. A zombie keeps its start time: its pid is not free yet."""
    if pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except FileNotFoundError:
        return None if os.path.isdir("/proc/self") else _ps_start(pid)
    except OSError:
        return None
    # Fields after the command name (which may hold spaces and parentheses): the state
    # is field 3, the start time field 22.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else None


def _ps_start(pid: int) -> str | None:
    try:
        done = subprocess.run(
            ["ps", "-o", "lstart=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=_PS_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None
