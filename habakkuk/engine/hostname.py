"""This process's host name, as leases and running jobs record it.

"A dead process on this host" is judged by comparing a holder's host with ours and then
asking the kernel about its pid; that holds only when every node sharing a database
has a name of its own. `HABAKKUK_HOSTNAME` sets it (two containers on one machine, a
test playing two hosts); without it, the machine's name.
"""

from __future__ import annotations

import os
import socket

HOSTNAME_ENV = "HABAKKUK_HOSTNAME"


def this_host() -> str:
    """`HABAKKUK_HOSTNAME` when set (and not blank), else the machine's name. Read on each
    call, so a queue or lease made after the variable changes sees the new name."""
    return os.environ.get(HOSTNAME_ENV, "").strip() or socket.gethostname()
