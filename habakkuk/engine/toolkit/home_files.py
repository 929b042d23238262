"""The home's own files: never "inside the workspace", whatever the workspace is.

A user may point `workspace:` at `~` or at a folder holding $HABAKKUK_HOME. The
home's files (config.yaml, .env, auth.json, databases, channel credentials,
checkpoints, logs) are then below the workspace, yet an agent must not edit
its own config (say `mode: workspace` -> `full`) or read the credentials
without approval. So every file tool's permission decision asks `home_file`:

- STATE: writing needs approval below full mode (read-only denies, unattended
  runs deny).
- CREDENTIAL: also, reading is refused below full mode.
- KNOWLEDGE: the agents' memory (agents/<name>/memory, USER.md, IDENTITY.md) and
  skills (agents/<name>/skills, the shared skills/). Their own tools write them
  (memory_save, user_profile_update, set_identity, skill_save), which refuse secrets
  and scan skills; a file tool writing there would store a key as a trusted note or
  a skill nobody scanned. So file-writing tools refuse them in every mode, full
  included (`knowledge_file` says which tool to use); reading them stays allowed, and
  a person's edits in an editor are the truth as before.
- None: an ordinary path: every agent's default workspace (agents/<name>/workspace),
  and anything inside a workspace that lies in the home.

Paths are compared resolved, symlinks followed, so a link in the workspace to
the home's config is the config. The names below the home are matched without
case, and on a file system that ignores case the home itself is too (macOS keeps
whatever spelling a path was given in), so `Agents/Main/MEMORY/` is the memory.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# The home's credential files and folders, relative to the home.
CREDENTIAL_FILES = frozenset({".env", "auth.json", "auth.json.lock"})
CREDENTIAL_FOLDERS = frozenset({"channels", "ssh", "keys", "backups"})
KEY_SUFFIXES = frozenset({".key", ".pem", ".p12", ".pfx"})
# What the memory and skills tools own in an agent's folder (agents/<agent>/...), by the
# name's case-folded spelling: a file tool never writes these.
KNOWLEDGE_FOLDERS = frozenset({"memory", "skills"})
KNOWLEDGE_FILES = frozenset({"user.md", "identity.md"})


class HomeFile(enum.Enum):
    """What kind of the home's own file a path is."""

    STATE = "state"
    CREDENTIAL = "credential"
    KNOWLEDGE = "knowledge"


@dataclass(frozen=True)
class Knowledge:
    """An agent's memory or skills file, and the tool that writes it (with its checks)."""

    what: str  # "main's memory", "the shared skills"...
    tool: str  # memory_save, skill_save, user_profile_update, set_identity
    why: str  # what that tool does that a file tool does not

    def refusal(self, path: Path, tool: str) -> str:
        """The one line a file tool's call gets instead of writing `path`."""
        return (
            f"refused: {path} is part of {self.what}, which {tool} never writes (in any mode):"
            f" use {self.tool}, which {self.why}"
        )


def _real(path: Path) -> PurePosixPath:
    return PurePosixPath(os.path.realpath(path))


def _below(path: PurePosixPath, root: PurePosixPath) -> bool:
    return path == root or root in path.parents


def home_file(path: Path, home: Path, *, workspace: Path, agent: str) -> HomeFile | None:
    """Whether `path` is one of the home's own files (see the module doc), and which kind.

    `workspace` and `agent` are the calling agent's: a workspace inside the home, and
    any agent's default workspace, are not the home's files.
    """
    real, root = _real(path), _real(home)
    parts = _home_parts(real, root)
    if parts is None:
        return None
    if not parts:
        return HomeFile.STATE  # the home folder itself
    if parts[0] in CREDENTIAL_FOLDERS or (len(parts) == 1 and _is_credential_name(parts[0])):
        return HomeFile.CREDENTIAL
    if _knowledge(parts) is not None:
        return HomeFile.KNOWLEDGE
    if parts[0] == "agents" and len(parts) >= 3 and parts[2] == "workspace":
        return None  # every agent's default workspace
    space = _real(workspace)
    if space != root and _below(space, root) and _below(real, space):
        return None  # a workspace the user put inside the home: its files are the user's
    return HomeFile.STATE


def knowledge_file(path: Path, home: Path) -> Knowledge | None:
    """The memory or skills file `path` is (resolved, links followed, any case), or None."""
    parts = _home_parts(_real(path), _real(home))
    return _knowledge(parts) if parts else None


def _knowledge(parts: tuple[str, ...]) -> Knowledge | None:
    folded = [part.casefold() for part in parts[:3]]
    if folded[0] == "skills":
        return Knowledge(
            "the shared skills (installed, or made by the user)",
            "skill_save",
            "saves the agent's own copy of a skill after scanning it",
        )
    if folded[0] != "agents" or len(parts) < 3:
        return None
    name, part = parts[1], folded[2]
    if part not in KNOWLEDGE_FOLDERS and (len(parts) > 3 or part not in KNOWLEDGE_FILES):
        return None
    if part == "memory":
        return Knowledge(
            f"{name}'s memory", "memory_save", "checks a note for secrets and records it"
        )
    if part == "skills":
        return Knowledge(f"{name}'s skills", "skill_save", "scans a skill before it is saved")
    if part == "user.md":
        return Knowledge(
            f"{name}'s profile of the user",
            "user_profile_update",
            "checks the profile for secrets and records the change",
        )
    return Knowledge(f"{name}'s identity", "set_identity", "records the change")


def _home_parts(real: PurePosixPath, root: PurePosixPath) -> tuple[str, ...] | None:
    """`real`'s parts below the home `root`, or None when it is not below it."""
    if _below(real, root):
        return real.relative_to(root).parts
    depth = len(root.parts)
    if len(real.parts) >= depth and _ignores_case(str(root)):
        head = [part.casefold() for part in real.parts[:depth]]
        if head == [part.casefold() for part in root.parts]:
            return real.parts[depth:]
    return None


_CASE_BLIND: dict[str, bool] = {}  # home folder -> whether its file system ignores case


def _ignores_case(root: str) -> bool:
    """Whether the file system holding the folder `root` ignores case (APFS, NTFS...):
    the nearest folder with a letter in its name, spelled the other way, is itself.
    Remembered once known (not while the folder does not exist yet)."""
    known = _CASE_BLIND.get(root)
    if known is not None:
        return known
    folder = PurePosixPath(root)
    while folder.name and folder.name.swapcase() == folder.name:
        folder = folder.parent
    if not folder.name:
        return False
    try:
        here = os.stat(folder)
    except OSError:
        return False
    try:
        blind = os.path.samestat(here, os.stat(folder.parent / folder.name.swapcase()))
    except OSError:
        blind = False
    if len(_CASE_BLIND) < 64:
        _CASE_BLIND[root] = blind
    return blind


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
