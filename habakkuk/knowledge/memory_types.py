"""The memory's values and the narrow Protocol every surface uses.

The terminal app, the chats (through the command layer), the CLI, the HTTP API, the
tools and the background review all depend on `MemoryAccess`, never on the store's
classes, so each can be tested against the real service or a small fake of it.
Every method takes the agent's name: one agent's caller cannot reach another's files
unless it names that agent, and the tools and commands only ever pass their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from habakkuk.engine.errors import HabakkukError

Trust = Literal["trusted", "untrusted"]
# Who made a change: the agent's tools, the user (CLI, /remember, the screen, the API),
# the background review or nightly pass, the skills curator, a hand edit the index
# noticed, or Habakkuk itself (a migration, a restore's bookkeeping).
ChangedBy = Literal["agent", "user", "review", "curator", "hand", "system"]
ChangeKind = Literal["note", "profile", "identity", "skill"]
ChangeOp = Literal["created", "updated", "deleted"]
ProfileMode = Literal["append", "replace", "remove"]
RestoreVersion = Literal["before", "after"]


class SecretRefused(HabakkukError):
    """A write was refused because its text looks like a secret.

    The message names what matched ("an AWS access key", "a password assignment") and
    where (which field), never the value.
    """


class TaintRefused(HabakkukError):
    """A tainted turn tried to change the profile or the identity."""


@dataclass(frozen=True)
class Provenance:
    """Who is writing, from where: recorded in the note's frontmatter and the history."""

    by: ChangedBy
    session: str = ""
    tool: str = ""
    tainted: bool = False  # external content had entered the turn that writes
    note: str = ""  # a short reason shown in the history ("merged 3 notes", ...)


@dataclass(frozen=True)
class NoteSummary:
    """One note as listed: everything but the body."""

    slug: str
    title: str
    tags: tuple[str, ...]
    created: str  # RFC 3339 UTC, e.g. "2026-11-06T09:12:00Z"
    updated: str
    source: str = ""  # agent, user, review, hand (spec: frontmatter `source`)
    session: str = ""
    trust: Trust = "trusted"
    # The file is over the size a note is read up to (notes.READ_MAX_BYTES): only its
    # beginning is indexed and shown, and Habakkuk does not rewrite it.
    partial: bool = False

    @property
    def untrusted(self) -> bool:
        return self.trust == "untrusted"


@dataclass(frozen=True)
class Note(NoteSummary):
    """One note with its body (the Markdown after the frontmatter)."""

    body: str = ""


@dataclass(frozen=True)
class MemoryHit:
    """One search result: the note, a snippet with matched words in [brackets]."""

    note: NoteSummary
    snippet: str
    score: float  # higher is better (fused rank when semantic search is on)


@dataclass(frozen=True)
class SaveResult:
    """What a save did: `created` (a new slug) or replaced; `unchanged` when the file
    already held exactly that note (nothing written, no history row)."""

    note: Note
    created: bool
    unchanged: bool = False


@dataclass(frozen=True)
class Change:
    """One recorded change to a note, USER.md, IDENTITY.md or an own skill (spec 001)."""

    id: str
    agent: str
    kind: ChangeKind
    name: str  # the slug, "USER.md", "IDENTITY.md" or the skill's name
    path: str  # relative to the agent's folder, e.g. "memory/coffee.md"
    op: ChangeOp
    old_hash: str  # SHA-256 of the content before ("" when created)
    new_hash: str  # after ("" when deleted)
    by: ChangedBy
    tool: str
    session: str
    tainted: bool
    note: str
    restores: str  # the id of the change this one restored, else ""
    at: str  # RFC 3339 UTC


@dataclass(frozen=True)
class ChangeDetail:
    """A change with both versions and its unified diff."""

    change: Change
    before: str | None  # None when the file did not exist
    after: str | None
    diff: str


@dataclass(frozen=True)
class RestoreResult:
    """A restore: the change it recorded, or `unchanged` when the file already held it."""

    restored: Change | None
    unchanged: bool


@dataclass(frozen=True)
class ReindexStats:
    """What one pass over the files did."""

    scanned: int
    updated: int  # rows written (new or changed files)
    removed: int  # rows whose file is gone
    seconds: float


@dataclass(frozen=True)
class MemorySnapshot:
    """What a new session's frozen prompt lists: the newest titles and how many more."""

    notes: tuple[NoteSummary, ...]  # the most recently updated, at most 50, newest first
    more: int  # notes not listed
    profile: str  # USER.md, possibly cut (see `profile_cut`)
    profile_cut: bool = False
    identity: str = ""  # IDENTITY.md


@dataclass(frozen=True)
class NoteQuery:
    """A listing or search request (the same shape on every surface)."""

    text: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)
    limit: int = 20
    offset: int = 0


ProposalAction = Literal["forget", "save", "profile"]


@dataclass(frozen=True)
class Proposal:
    """A change the review or nightly pass may not make alone: deleting a note, emptying
    USER.md or shrinking a note by more than half. The user applies or dismisses it."""

    id: str
    agent: str
    action: ProposalAction
    name: str  # the slug, or "USER.md"
    title: str  # for a save: the note's title; for a profile change: the section
    content: str  # the proposed new text ("" for a forget)
    reason: str
    by: ChangedBy
    session: str
    at: str


class ChangeRecorder(Protocol):
    """The memory's history, as another service (the skills, their curator) records the
    changes it makes to an agent's folder."""

    async def record_change(
        self,
        agent: str,
        kind: ChangeKind,
        name: str,
        path: str,
        before: str | None,
        after: str | None,
        provenance: Provenance,
    ) -> Change | None:
        """Record a change another service made to a file in the agent's folder (`path`
        relative to it, e.g. "skills/x/SKILL.md"), so the history shows it and restore can
        undo it. None when before and after are the same."""
        ...


class MemoryAccess(ChangeRecorder, Protocol):
    """The memory of the home's agents, as every surface and tool uses it (the history's
    `record_change` comes with ChangeRecorder).

    Errors are HabakkukError subclasses with one-line messages: NotFound (no such note,
    change or agent), SecretRefused, TaintRefused, HabakkukError for bad input.
    """

    async def list_notes(
        self, agent: str, *, limit: int = 50, offset: int = 0
    ) -> tuple[list[NoteSummary], int]:
        """Notes newest (updated) first, and the total count."""
        ...

    async def search(
        self, agent: str, query: str, *, tags: tuple[str, ...] = (), limit: int = 10
    ) -> list[MemoryHit]:
        """Ranked matches (every given tag required); [] for an empty query without tags."""
        ...

    async def read(self, agent: str, slug: str, *, mark_read: bool = True) -> Note:
        """One note (and remember that it was read, for the nightly pass, unless
        `mark_read` is False)."""
        ...

    async def save(
        self,
        agent: str,
        title: str,
        content: str,
        *,
        tags: list[str] | None = None,
        provenance: Provenance,
        replace: bool = True,
    ) -> SaveResult:
        """Create or replace the note whose slug derives from `title`.

        An update keeps `created` and keeps tags unless new ones are given;
        `replace=False` (/remember) never replaces: a taken slug gets a suffix.
        A tainted provenance writes `trust: untrusted`; rewriting an untrusted note keeps
        the mark unless the user writes it.
        """
        ...

    async def replace(
        self,
        agent: str,
        slug: str,
        title: str,
        content: str,
        *,
        tags: list[str] | None = None,
        provenance: Provenance,
    ) -> SaveResult:
        """Replace note `slug`; a new title saves it under the new slug and trashes the old."""
        ...

    async def forget(self, agent: str, slug: str, *, provenance: Provenance) -> NoteSummary:
        """Move the note to memory/.trash/; NotFound when there is none."""
        ...

    async def trust(self, agent: str, slug: str, *, provenance: Provenance) -> Note:
        """The user vouches for a note: `trust: trusted` (refused for non-user provenance)."""
        ...

    async def profile(self, agent: str) -> str:
        """USER.md as it is on disk ("" when there is none)."""
        ...

    async def update_profile(
        self,
        agent: str,
        section: str,
        content: str,
        *,
        mode: ProfileMode = "append",
        provenance: Provenance,
    ) -> str:
        """Change one `## section` of USER.md (capped at 6,000 bytes); the new profile."""
        ...

    async def identity(self, agent: str) -> str:
        """IDENTITY.md ("" when the agent has none)."""
        ...

    async def set_identity(
        self, agent: str, name: str, emoji: str, manner: str, *, provenance: Provenance
    ) -> str:
        """Write IDENTITY.md; TaintRefused in a tainted turn."""
        ...

    async def history(
        self,
        agent: str,
        *,
        name: str | None = None,
        kind: ChangeKind | None = None,
        since: str | None = None,
        limit: int = 50,
    ) -> list[Change]:
        """Changes newest first; `since` is "7d", "12h" or a date."""
        ...

    async def change(self, agent: str, change_id: str) -> ChangeDetail:
        """One change with its diff; the id may be shortened to four characters."""
        ...

    async def restore(
        self,
        agent: str,
        change_id: str,
        *,
        version: RestoreVersion = "before",
        provenance: Provenance,
    ) -> RestoreResult:
        """Put back the content before (undo) or after (redo) a change, as a new change."""
        ...

    async def reindex(self, agent: str, *, full: bool = False) -> ReindexStats:
        """Bring the index up to date with the files (`full`: rebuild it)."""
        ...

    async def snapshot(self, agent: str) -> MemorySnapshot:
        """What a new session's prompt lists."""
        ...

    async def proposals(self, agent: str) -> list[Proposal]:
        """Open proposals, oldest first."""
        ...

    async def resolve_proposal(
        self, agent: str, proposal_id: str, *, apply: bool, provenance: Provenance
    ) -> Proposal:
        """Apply (as the user) or dismiss a proposal; NotFound when it is not open."""
        ...


class ProposalCreated(HabakkukError):
    """The review or nightly pass asked for a change only the user may make (deleting a
    note, emptying USER.md, shrinking a note by more than half): nothing was changed and
    `proposal` waits in `proposals()` for the user to apply or dismiss it."""

    def __init__(self, proposal: Proposal):
        super().__init__(
            f"memory: not changed; proposed to the user as {proposal.id}: {proposal.reason}"
        )
        self.proposal = proposal
