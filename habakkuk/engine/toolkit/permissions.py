"""Permission modes x tool risk: allow, deny, or ask the approver.

| mode      | read  | write                          | exec / network |
|-----------|-------|--------------------------------|----------------|
| read-only | allow | deny                           | deny           |
| ask       | allow | ask                            | ask            |
| workspace | allow | allow inside the workspace,    | ask            |
|           |       | else ask                       |                |
| full      | allow | allow                          | allow          |

Own-state tools (memory, skills: they only touch the agent's own folder) count
as writes inside the workspace. The home's own files (home_files.home_file)
never count as inside it, even in a workspace that holds the home; the agents'
memory and skills folders are refused to the file-writing tools in every mode
(the registry asks home_files.knowledge_file), so only their own tools, with the
secret check and the scan, write them.
"""

from __future__ import annotations

import enum
import errno
import os
from pathlib import Path
from typing import Literal

Verdict = Literal["allow", "deny", "ask"]


class Risk(enum.Enum):
    READ = "read"
    WRITE = "write"
    NETWORK = "network"
    EXEC = "exec"


# Longer than any path the kernel takes (Linux PATH_MAX): refused before resolving it,
# since resolving a 100 KB path component by component blocks the event loop for seconds.
MAX_PATH_BYTES = 4096


def check_path(path: Path) -> None:
    """Raise ValueError (a NUL byte) or OSError (too long) for a path no file can have."""
    text = os.fspath(path)
    if "\0" in text:
        raise ValueError(f"embedded null byte in path {text[:120]!r}")
    if len(os.fsencode(text)) > MAX_PATH_BYTES:
        raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), text)


def inside(path: Path, root: Path) -> bool:
    """Whether `path` (resolved, symlinks followed) is `root` or below it."""
    try:
        check_path(path)
        resolved = Path(os.path.realpath(path))
        base = Path(os.path.realpath(root))
    except OSError:
        return False
    return resolved == base or base in resolved.parents


def decide(
    mode: str,
    risk: Risk,
    *,
    paths_inside_workspace: bool | None = None,
    own_state: bool = False,
    network_in_workspace: bool = False,
) -> Verdict:
    """The policy verdict for one call before any approver is consulted.

    `paths_inside_workspace` is None for tools without paths, else whether every
    path the call touches is inside the workspace. `network_in_workspace` marks
    tools whose network risk workspace mode runs without asking (MCP servers
    declared `risk: network`, per spec 004).
    """
    if risk is Risk.READ:
        return "allow"
    if mode == "full":
        return "allow"
    if mode == "read-only":
        return "deny"
    if mode == "ask":
        return "ask"
    # workspace mode
    if risk is Risk.WRITE and (own_state or paths_inside_workspace is True):
        return "allow"
    if risk is Risk.NETWORK and network_in_workspace:
        return "allow"
    return "ask"
