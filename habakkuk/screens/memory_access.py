"""What the Memory screens use of the memory (a narrow slice of `MemoryAccess`).

The screens reach it through the app's host (`runtime.memory`) and never import the
service, so they can be driven by the real service or anything shaped like this.
"""

from __future__ import annotations

from typing import Protocol

from habakkuk.knowledge.memory_types import (
    Change,
    ChangeDetail,
    ChangeKind,
    MemoryHit,
    Note,
    NoteSummary,
    Proposal,
    Provenance,
    RestoreResult,
    RestoreVersion,
    SaveResult,
)

# Every write from the terminal app is the user's own.
USER = Provenance(by="user", tool="tui")


class MemoryScreenAccess(Protocol):
    """The memory calls the Memory screen, its history and its proposals make."""

    async def list_notes(
        self, agent: str, *, limit: int = 50, offset: int = 0
    ) -> tuple[list[NoteSummary], int]:
        """Notes newest first, and the total count."""
        ...

    async def search(
        self, agent: str, query: str, *, tags: tuple[str, ...] = (), limit: int = 10
    ) -> list[MemoryHit]:
        """Ranked matches."""
        ...

    async def read(self, agent: str, slug: str) -> Note:
        """One note with its body."""
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
        """Replace note `slug`."""
        ...

    async def forget(self, agent: str, slug: str, *, provenance: Provenance) -> NoteSummary:
        """Move the note to memory/.trash/."""
        ...

    async def trust(self, agent: str, slug: str, *, provenance: Provenance) -> Note:
        """The user vouches for a note."""
        ...

    async def profile(self, agent: str) -> str:
        """USER.md as it is on disk."""
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
        """Changes newest first."""
        ...

    async def change(self, agent: str, change_id: str) -> ChangeDetail:
        """One change with its diff."""
        ...

    async def restore(
        self,
        agent: str,
        change_id: str,
        *,
        version: RestoreVersion = "before",
        provenance: Provenance,
    ) -> RestoreResult:
        """Put back the content before or after a change."""
        ...

    async def proposals(self, agent: str) -> list[Proposal]:
        """Open proposals, oldest first."""
        ...

    async def resolve_proposal(
        self, agent: str, proposal_id: str, *, apply: bool, provenance: Provenance
    ) -> Proposal:
        """Apply or dismiss a proposal."""
        ...
