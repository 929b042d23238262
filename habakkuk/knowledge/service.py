"""The memory service: one agent's notes, profile, identity and history, behind MemoryAccess.

Every surface and tool goes through `Memory`; it is the only writer of the memory files
besides people with an editor, and every write it makes is checked for secrets, marked
with its provenance and recorded in the history. Per-agent resources (memory.db,
history.db) open on first use and close with `close()`. Writes and index syncs of one
agent are serialised by a lock, so a sync never mistakes the service's own write for a
hand edit.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from habakkuk.engine.control_chars import refuse_controls
from habakkuk.engine.errors import HabakkukError, NotFound

from .agent_memory import (
    AgentMemory,
    read_text,
    write_file,
)
from .frontmatter import parse
from .history import Stat, unified_diff
from .memory_types import (
    Change,
    ChangeDetail,
    ChangeKind,
    MemoryAccess,
    MemorySnapshot,
    NoteSummary,
    ProfileMode,
    Proposal,
    ProposalCreated,
    Provenance,
    ReindexStats,
    RestoreResult,
    RestoreVersion,
    TaintRefused,
)
from .note_checks import checked_body, checked_title
from .note_store import IDENTITY_FILE, PROFILE_FILE, NoteStore, refuse_partial
from .notes import check_slug
from .profile import PROFILE_CAP, change_section, check_cap, cut, render_identity

SNAPSHOT_NOTES = 50
SNAPSHOT_BYTES = 4_096


class Memory(NoteStore):
    """The memory of the home's agents (implements `MemoryAccess`): the notes of
    `NoteStore`, plus the profile, the identity, the history and the proposals."""

    # -- profile and identity ----------------------------------------------------------

    async def profile(self, agent: str) -> str:
        """USER.md as it is on disk ("" when there is none)."""
        am = await self._agent(agent)
        found = await asyncio.to_thread(read_text, am.folder / PROFILE_FILE)
        return found[0] if found else ""

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
        am = await self._agent(agent)
        if provenance.tainted:
            raise TaintRefused(
                "user profile: this turn read external content, so it cannot change USER.md; "
                "the user can state it again in a new message"
            )
        refuse_controls(str(section), "user profile: the section")
        refuse_controls(str(content), "user profile: the content")
        self._refuse_secrets("user profile", [("section", str(section)), ("content", str(content))])
        async with am.lock:
            await self._sync(am)
            found = await asyncio.to_thread(read_text, am.folder / PROFILE_FILE)
            old = found[0] if found else ""
            new = change_section(old, section, str(content), mode)
            if new == old:
                return old
            check_cap(new)
            if provenance.by == "review" and old.strip() and not new.strip():
                raise ProposalCreated(
                    await am.history.propose(
                        action="profile",
                        name=PROFILE_FILE,
                        title=str(section),
                        content=new,
                        reason="empties USER.md",
                        provenance=provenance,
                    )
                )
            await self._write_other(
                am, "profile", PROFILE_FILE, found[0] if found else None, new, provenance
            )
            return new

    async def _write_other(
        self,
        am: AgentMemory,
        kind: ChangeKind,
        name: str,
        before: str | None,
        text: str,
        provenance: Provenance,
        restores: str = "",
    ) -> Change | None:
        stat = await asyncio.to_thread(write_file, am.folder / name, text)
        return await am.history.record(
            kind=kind,
            name=name,
            path=name,
            before=before,
            after=text,
            provenance=provenance,
            restores=restores,
            stat=stat,
        )

    async def identity(self, agent: str) -> str:
        """IDENTITY.md ("" when the agent has none)."""
        am = await self._agent(agent)
        found = await asyncio.to_thread(read_text, am.folder / IDENTITY_FILE)
        return found[0] if found else ""

    async def set_identity(
        self, agent: str, name: str, emoji: str, manner: str, *, provenance: Provenance
    ) -> str:
        """Write IDENTITY.md; TaintRefused in a tainted turn."""
        am = await self._agent(agent)
        if provenance.tainted:
            raise TaintRefused(
                "identity: this turn read external content, so it cannot change IDENTITY.md"
            )
        for field, value in (("name", name), ("emoji", emoji), ("manner", manner)):
            refuse_controls(str(value), f"identity: the {field}")
        self._refuse_secrets(
            "identity", [("name", str(name)), ("emoji", str(emoji)), ("manner", str(manner))]
        )
        text = render_identity(str(name), str(emoji), str(manner))
        async with am.lock:
            await self._sync(am)
            found = await asyncio.to_thread(read_text, am.folder / IDENTITY_FILE)
            before = found[0] if found else None
            if before != text:
                await self._write_other(am, "identity", IDENTITY_FILE, before, text, provenance)
        return text

    # -- history -----------------------------------------------------------------------

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
        """Record a change another service (the skills) made to a file of the agent's
        folder, after writing it; `habakkuk memory history --kind` shows it and restore
        puts either version back."""
        am = await self._agent(agent)
        target = am.file(path)  # refuses a path outside the agent's folder
        stat = None
        if after is not None:
            with contextlib.suppress(OSError):
                info = await asyncio.to_thread(target.stat)
                stat = Stat(info.st_mtime_ns, info.st_size)
        async with am.lock:
            return await am.history.record(
                kind=kind,
                name=name,
                path=path,
                before=before,
                after=after,
                provenance=provenance,
                stat=stat,
            )

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
        am = await self._agent(agent)
        await self._synced(am)
        return await am.history.changes(name=name, kind=kind, since=since, limit=limit)

    async def change(self, agent: str, change_id: str) -> ChangeDetail:
        """One change with its diff; the id may be shortened to four characters."""
        am = await self._agent(agent)
        found = await am.history.change(change_id)
        before = await am.history.version(found.old_hash)
        after = await am.history.version(found.new_hash)
        return ChangeDetail(found, before, after, unified_diff(found.path, before, after))

    async def restore(
        self,
        agent: str,
        change_id: str,
        *,
        version: RestoreVersion = "before",
        provenance: Provenance,
    ) -> RestoreResult:
        """Put back the content before (undo) or after (redo) a change, as a new change."""
        am = await self._agent(agent)
        if version not in ("before", "after"):
            raise HabakkukError(f"restore: version {version!r}: use before or after")
        found = await am.history.change(change_id)
        digest = found.old_hash if version == "before" else found.new_hash
        target = await am.history.version(digest)
        if digest and target is None:
            raise HabakkukError(f"restore {found.id[:8]}: that version is no longer kept")
        path = am.file(found.path)
        async with am.lock:
            await self._sync(am)
            if found.kind == "note":
                note = await asyncio.to_thread(am.files.read, check_slug(found.name))
                if note is not None and target is not None:
                    refuse_partial(found.name, note)
                current = note.text if note is not None else None
            else:
                current_found = await asyncio.to_thread(read_text, path)
                current = current_found[0] if current_found else None
            if current == target:
                return RestoreResult(restored=None, unchanged=True)
            if found.kind == "note":
                slug = check_slug(found.name)
                if target is None:
                    await asyncio.to_thread(am.files.trash, slug)
                    await am.index.drop(slug)
                else:
                    stat = await asyncio.to_thread(am.files.write, slug, target)
                    await am.index.put(slug, target, stat.st_mtime_ns, stat.st_size)
                    am.embed_soon()
                record_stat = None
            elif target is None:
                await asyncio.to_thread(path.unlink, missing_ok=True)
                record_stat = None
            else:
                record_stat = await asyncio.to_thread(write_file, path, target)
            change = await am.history.record(
                kind=found.kind,
                name=found.name,
                path=found.path,
                before=current,
                after=target,
                provenance=provenance,
                restores=found.id,
                stat=record_stat,
            )
        return RestoreResult(restored=change, unchanged=False)

    async def reindex(self, agent: str, *, full: bool = False) -> ReindexStats:
        """Bring the index up to date with the files (`full`: rebuild it)."""
        am = await self._agent(agent)
        async with am.lock:
            return await self._sync(am, full=full)

    # -- the prompt's snapshot ---------------------------------------------------------

    async def snapshot(self, agent: str) -> MemorySnapshot:
        """What a new session's prompt lists: newest titles (4 KB), the profile, the identity."""
        notes, total = await self.list_notes(agent, limit=SNAPSHOT_NOTES)
        listed: list[NoteSummary] = []
        used = 0
        for note in notes:
            line = f"- {note.title} ({note.slug}){' [untrusted]' if note.untrusted else ''}\n"
            used += len(line.encode("utf-8"))
            if used > SNAPSHOT_BYTES:
                break
            listed.append(note)
        folder = (await self._agent(agent)).folder
        found = await asyncio.to_thread(
            lambda: [read_text(folder / name) for name in (PROFILE_FILE, IDENTITY_FILE)]
        )
        text, identity = (item[0] if item else "" for item in found)
        profile, profile_cut = cut(text, PROFILE_CAP)
        return MemorySnapshot(
            notes=tuple(listed),
            more=total - len(listed),
            profile=profile,
            profile_cut=profile_cut,
            identity=identity,
        )

    # -- proposals ---------------------------------------------------------------------

    async def proposals(self, agent: str) -> list[Proposal]:
        """Open proposals, oldest first."""
        am = await self._agent(agent)
        return await am.history.open_proposals()

    async def resolve_proposal(
        self, agent: str, proposal_id: str, *, apply: bool, provenance: Provenance
    ) -> Proposal:
        """Apply (as the user) or dismiss a proposal; NotFound when it is not open."""
        am = await self._agent(agent)
        proposal = await am.history.open_proposal(str(proposal_id))
        if not apply:
            await am.history.close_proposal(proposal.id, "dismissed")
            return proposal
        user = Provenance(
            by="user",
            session=provenance.session,
            tool=provenance.tool,
            note=f"applied proposal {proposal.id}",
        )
        if proposal.action == "forget":
            # Already gone is fine: forgetting is idempotent.
            with contextlib.suppress(NotFound):
                await self.forget(agent, proposal.name, provenance=user)
        elif proposal.action == "save":
            self._refuse_secrets(
                "proposal", [("title", proposal.title), ("content", proposal.content)]
            )
            async with am.lock:
                slug = check_slug(proposal.name)
                await self._sync(am, only=(slug,))
                existing = await asyncio.to_thread(am.files.read, slug)
                if existing is not None:
                    refuse_partial(slug, existing)
                old = parse(existing.text, slug, existing.mtime) if existing else None
                await self._write_note(
                    am,
                    slug,
                    checked_title(proposal.title),
                    checked_body(proposal.content),
                    None,
                    user,
                    old=old,
                    before=existing.text if existing else None,
                )
        else:
            self._refuse_secrets("proposal", [("content", proposal.content)])
            check_cap(proposal.content)
            async with am.lock:
                await self._sync(am)
                found = await asyncio.to_thread(read_text, am.folder / PROFILE_FILE)
                before = found[0] if found else None
                if before != proposal.content:
                    await self._write_other(
                        am, "profile", PROFILE_FILE, before, proposal.content, user
                    )
        await am.history.close_proposal(proposal.id, "applied")
        return proposal


if TYPE_CHECKING:

    def _implements_memory_access(memory: Memory) -> MemoryAccess:
        """mypy checks here that `Memory` satisfies the Protocol every surface uses."""
        return memory
