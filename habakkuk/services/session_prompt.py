"""What a new session's frozen prompt takes from the agent's folder and its memory.

SOUL.md, IDENTITY.md, AGENTS.md and USER.md are read when a session starts (so an edit
reaches the next session without a restart), with the memory's snapshot of the newest
notes. A chat session of an agent nobody has met yet (no identity, no profile, no
`.onboarding` marker) takes the one-time welcome: the marker is created with O_EXCL, so
two chats opening at once welcome once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from habakkuk.engine.agent.prompt import PromptNote, PromptSections, PromptSkill

if TYPE_CHECKING:
    from habakkuk.engine.config import AgentConfig
    from habakkuk.knowledge.memory_types import MemoryAccess
    from habakkuk.knowledge.skills.types import SkillsAccess

ONBOARDING_MARKER = ".onboarding"


def _read(path: Path) -> str:
    """A text file's content, "" when it is missing or unreadable."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def take_welcome(folder: Path) -> bool:
    """Whether this session welcomes the user: true once per agent, for the first caller.

    An agent with an identity or a profile has met its user; otherwise the marker decides,
    created atomically so that exactly one of several concurrent callers wins.
    """
    if (folder / "IDENTITY.md").exists() or (folder / "USER.md").exists():
        return False
    folder.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(folder / ONBOARDING_MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


async def gather_sections(
    agent: AgentConfig,
    folder: Path,
    memory: MemoryAccess | None,
    *,
    chat: bool,
    skills: SkillsAccess | None = None,
) -> PromptSections:
    """The sections of a new session's prompt for `agent`, whose folder is `folder`
    (the skills' listing only when the agent has the skills toolset)."""
    has_memory = "memory" in agent.toolsets
    soul, standing = await asyncio.to_thread(
        lambda: (_read(folder / "SOUL.md"), _read(folder / "AGENTS.md"))
    )
    notes: tuple[PromptNote, ...] = ()
    more = 0
    profile_cut = False
    if memory is not None and has_memory:
        snapshot = await memory.snapshot(agent.name)
        notes = tuple(PromptNote(n.slug, n.title, n.untrusted) for n in snapshot.notes)
        more = snapshot.more
        identity, profile, profile_cut = snapshot.identity, snapshot.profile, snapshot.profile_cut
    else:
        identity, profile = await asyncio.to_thread(
            lambda: (_read(folder / "IDENTITY.md"), _read(folder / "USER.md"))
        )
    welcome = False
    if chat and has_memory:
        # A folder that cannot be written (a read-only home) just means no welcome.
        with contextlib.suppress(OSError):
            welcome = await asyncio.to_thread(take_welcome, folder)
    listed: tuple[PromptSkill, ...] = ()
    missing = 0
    if skills is not None and "skills" in agent.toolsets:
        snap = await skills.snapshot(agent.name)
        listed = tuple(PromptSkill(s.name, s.description, not s.trusted) for s in snap.skills)
        missing = snap.missing
    return PromptSections(
        soul=soul,
        identity=identity,
        standing=standing,
        notes=notes,
        more_notes=more,
        profile=profile,
        profile_cut=profile_cut,
        welcome=welcome,
        skills=listed,
        more_skills=missing,
    )
