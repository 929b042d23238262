"""The home's own files: never "inside the workspace", whatever the workspace is.

A user may point `workspace:` at `~` or at a folder holding $HABAKKUK_HOME. The
home's files (config.yaml, .env, auth.json, databases, channel credentials,
checkpoints, logs) are then below the workspace, yet an agent must not edit
its own config (say `mode: workspace` -> `full`) or read the credentials
without approval. So every file tool's permission decision asks `home_file`:

- STATE: writing needs approval below full mode (read-only denies, unattended
  runs deny).
- CREDENTIAL: also, reading is refused below full mode.
- None: an ordinary path. Inside the home these are the agent's own state that
  spec 000 leaves writable (agents/<agent>/memory, agents/<agent>/skills,
  agents/<agent>/USER.md), every agent's default workspace
  (agents/<name>/workspace), and anything inside a workspace that lies in the
  home.

Paths are compared resolved, symlinks followed, so a link in the workspace to
the home's config is the config.
"""

from __future__ import annotations

import enum
import os
from pathlib import Path, PurePosixPath

# The home's credential files and folders, relative to the home.
CREDENTIAL_FILES = frozenset({".env", "auth.json", "auth.json.lock"})
CREDENTIAL_FOLDERS = frozenset({"channels", "ssh", "keys", "backups"})
KEY_SUFFIXES = frozenset({".key", ".pem", ".p12", ".pfx"})
# What an agent may write in its own folder (agents/<agent>/...) as in any workspace.
OWN_STATE = frozenset({"memory", "skills", "USER.md"})


class HomeFile(enum.Enum):
    """What kind of the home's own file a path is."""

    STATE = "state"
    CREDENTIAL = "credential"


def _real(path: Path) -> PurePosixPath:
    return PurePosixPath(os.path.realpath(path))


def _below(path: PurePosixPath, root: PurePosixPath) -> bool:
    return path == root or root in path.parents


def home_file(path: Path, home: Path, *, workspace: Path, agent: str) -> HomeFile | None:
    """Whether `path` is one of the home's own files (see the module doc), and which kind.

    `workspace` and `agent` are the calling agent's: its own memory, skills and
    profile, and a workspace inside the home, are not the home's files.
    """
    real = _real(path)
    root = _real(home)
    if not _below(real, root):
        return None
    parts = real.relative_to(root).parts
    if not parts:
        return HomeFile.STATE  # the home folder itself
    if parts[0] in CREDENTIAL_FOLDERS or (len(parts) == 1 and _is_credential_name(parts[0])):
        return HomeFile.CREDENTIAL
    if parts[0] == "agents" and len(parts) >= 3 and _writable_agent_part(parts[1:3], agent):
        return None
    space = _real(workspace)
    if space != root and _below(space, root) and _below(real, space):
        return None  # a workspace the user put inside the home: its files are the user's
    return HomeFile.STATE


def _writable_agent_part(parts: tuple[str, ...], agent: str) -> bool:
    """agents/<name>/workspace of any agent; memory, skills and USER.md of the caller."""
    name, part = parts
    return part == "workspace" or (name == agent and part in OWN_STATE)


def _is_credential_name(name: str) -> bool:
    return (
        name in CREDENTIAL_FILES
        or name.startswith(".env.")
        or PurePosixPath(name).suffix in KEY_SUFFIXES
    )


def workspace_contains_home(workspace: Path, home: Path) -> bool:
    """Whether the home folder is the workspace or below it (symlinks followed).

    Then the home's own files sit inside the workspace; the tools still treat them as
    outside it, and `habakkuk doctor` warns about the setup.
    """
    return _below(_real(home), _real(workspace))
