"""Where an agent's commands run (spec 000 "Sandboxes"): here (none), in a long-lived
container per agent (docker) or on a remote host (ssh). exec and the background processes
use one small interface, `Sandbox` (base.py): the local client to start for a command and
a way to kill its whole tree where it runs."""

from .base import Launch, Sandbox, SandboxError, Sandboxes
from .groups import CommandGroups
from .sandboxes import HomeSandboxes, LocalOnly

__all__ = [
    "CommandGroups",
    "HomeSandboxes",
    "Launch",
    "LocalOnly",
    "Sandbox",
    "SandboxError",
    "Sandboxes",
]
