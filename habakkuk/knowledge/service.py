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
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from habakkuk.engine.config import Config
from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.home import Home
from habakkuk.engine.store import Database

from .frontmatter import Parsed, normalise_tags, now, parse, render
from .history import HISTORY_MIGRATIONS, History, Stat, unified_diff
from .index import INDEX_MIGRATIONS, Index, SyncResult
from .memory_types import (
    Change,
    ChangeDetail,
    ChangeKind,
    MemoryHit,
    MemorySnapshot,
    Note,
    NoteSummary,
    ProfileMode,
    Proposal,
    ProposalCreated,
    Provenance,
    ReindexStats,
    RestoreResult,
    RestoreVersion,
    SaveResult,
    SecretRefused,
    TaintRefused,
    Trust,
)
from .notes import NoteFiles, check_slug, slugify, write_atomic
from .profile import PROFILE_CAP, change_section, check_cap, cut, render_identity
from .secrets import find_secret

SNAPSHOT_NOTES = 50
SNAPSHOT_BYTES = 4_096
NOTE_MAX_BYTES = 64_000
TITLE_MAX = 200
TAGS_MAX = 20
PROFILE_FILE = "USER.md"
IDENTITY_FILE = "IDENTITY.md"

SecretValues = Callable[[], Iterable[str] | Mapping[str, str]]


@dataclass
class _AgentMemory:
    """The open resources of one agent's memory."""

    name: str
    folder: Path  # the agent's folder
    files: NoteFiles
    index: Index
    history: History
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def file(self, relative: str) -> Path:
        """A path of the history (USER.md, memory/x.md) inside the agent's folder."""
        path = (self.folder / relative).resolve()
        if not path.is_relative_to(self.folder.resolve()):
            raise HabakkukError(f"memory of {self.name}: {relative!r} is outside its folder")
        return path


def _note(slug: str, parsed: Parsed) -> Note:
    return Note(
        slug=slug,
        title=parsed.title,
        tags=parsed.tags,
        created=parsed.created,
        updated=parsed.updated,
        source=parsed.source,
        session=parsed.session,
        trust=parsed.trust,
        body=parsed.body,
    )


def _read_text(path: Path) -> tuple[str, Stat] | None:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            text = handle.read()
            stat = os.fstat(handle.fileno())
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    return text, Stat(stat.st_mtime_ns, stat.st_size)


def _write_file(path: Path, text: str) -> Stat:
    write_atomic(path, text)
    stat = path.stat()
    return Stat(stat.st_mtime_ns, stat.st_size)


class Memory:
    """The memory of the home's agents (implements `MemoryAccess`)."""

    def __init__(self, home: Home, config: Config, secret_values: SecretValues):
        self.home = home
        self.config = config
        self._secret_values = secret_values
        self._agents: dict[str, _AgentMemory] = {}
        self._opening: asyncio.Lock | None = None

    # -- resources ---------------------------------------------------------------------

    async def _agent(self, agent: str) -> _AgentMemory:
        if not isinstance(agent, str) or agent not in self.config.agents:
            known = ", ".join(sorted(self.config.agents)) or "none"
            raise NotFound(f"memory: agent {agent!r} is not configured (agents: {known})")
        found = self._agents.get(agent)
        if found is not None:
            return found
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            found = self._agents.get(agent)
            if found is not None:
                return found
            found = await self._open(agent)
            self._agents[agent] = found
            return found

    async def _open(self, agent: str) -> _AgentMemory:
        folder = self.home.agent_dir(agent)
        notes_dir = folder / "memory"

        def _prepare() -> None:
            notes_dir.mkdir(parents=True, exist_ok=True)
            os.chmod(notes_dir, 0o700)

        await asyncio.to_thread(_prepare)
        index_db = await Database.open(folder / "memory.db", INDEX_MIGRATIONS)
        try:
            history_db = await Database.open(folder / "history.db", HISTORY_MIGRATIONS)
        except BaseException:
            await index_db.close()
            raise
        files = NoteFiles(notes_dir)
        history = History(history_db, agent)
        await history.prune(self.config.memory.history_days)
        return _AgentMemory(agent, folder, files, Index(index_db, files), history)

    async def database(self, agent: str) -> Database:
        """The agent's migrated memory.db (for the review and embeddings modules)."""
        return (await self._agent(agent)).index.db

    async def close(self) -> None:
        """Close every agent's databases."""
        agents, self._agents = list(self._agents.values()), {}
        for item in agents:
            await item.index.db.close()
            await item.history.db.close()

    # -- checks ------------------------------------------------------------------------

    def _refuse_secrets(self, what: str, fields: Iterable[tuple[str, str]]) -> None:
        values = self._secret_values()
        for name, text in fields:
            found = find_secret(text, values)
            if found:
                raise SecretRefused(
                    f"{what}: the {name} holds {found}; secrets are never stored in memory "
                    "(keep it in the home's .env or a password manager)"
                )

    @staticmethod
    def _clean_title(title: str) -> str:
        clean = " ".join(str(title).split())
        if not clean:
            raise HabakkukError("memory: title is empty")
        if len(clean) > TITLE_MAX:
            raise HabakkukError(f"memory: title is over {TITLE_MAX} characters")
        return clean

    @staticmethod
    def _clean_body(content: str) -> str:
        body = str(content).strip("\n")
        if not body.strip():
            raise HabakkukError("memory: content is empty")
        if len(body.encode("utf-8")) > NOTE_MAX_BYTES:
            raise HabakkukError(
                f"memory: content is over {NOTE_MAX_BYTES:,} bytes; split it into notes"
            )
        return body

    @staticmethod
    def _clean_tags(tags: list[str] | None) -> tuple[str, ...] | None:
        if tags is None:
            return None
        if isinstance(tags, str):
            tags = [tags]
        clean = normalise_tags(list(tags))
        if len(clean) > TAGS_MAX:
            raise HabakkukError(f"memory: at most {TAGS_MAX} tags")
        for tag in clean:
            if len(tag) > 40:
                raise HabakkukError(f"memory: tag {tag[:40]!r}... is over 40 characters")
        return clean

    # -- keeping the index and history up with the files ------------------------------

    async def _sync(self, am: _AgentMemory, *, full: bool = False) -> ReindexStats:
        """Bring the index up to the files and record hand edits (caller holds the lock)."""
        result = await am.index.sync(full=full)
        await self._record_seen(am, result)
        for name, kind in ((PROFILE_FILE, "profile"), (IDENTITY_FILE, "identity")):
            found = await asyncio.to_thread(_read_text, am.folder / name)
            await am.history.notice_file(
                kind=kind,  # type: ignore[arg-type]
                name=name,
                path=name,
                text=found[0] if found else None,
                stat=found[1] if found else None,
            )
        return result.stats

    async def _record_seen(self, am: _AgentMemory, result: SyncResult) -> None:
        if not result.seen:
            return
        if result.first_build:
            await am.history.observe(
                [(am.files.relative(s.slug), s.text) for s in result.seen if s.text is not None]
            )
            return
        for seen in result.seen:
            before = await am.history.version(seen.before_hash)
            await am.history.record(
                kind="note",
                name=seen.slug,
                path=am.files.relative(seen.slug),
                before=before,
                after=seen.text,
                provenance=Provenance(by="hand", note="edited outside Habakkuk"),
            )

    # -- notes -------------------------------------------------------------------------

    async def list_notes(
        self, agent: str, *, limit: int = 50, offset: int = 0
    ) -> tuple[list[NoteSummary], int]:
        """Notes newest (updated) first, and the total count."""
        am = await self._agent(agent)
        async with am.lock:
            await self._sync(am)
        return await am.index.listing(max(1, min(int(limit), 1000)), max(0, int(offset)))

    async def search(
        self, agent: str, query: str, *, tags: tuple[str, ...] = (), limit: int = 10
    ) -> list[MemoryHit]:
        """Ranked matches (every given tag required); [] for an empty query without tags."""
        am = await self._agent(agent)
        async with am.lock:
            await self._sync(am)
        found = await am.index.search(str(query or ""), tuple(tags), max(1, min(int(limit), 100)))
        return [MemoryHit(note=note, snippet=snip, score=score) for note, snip, score in found]

    async def read(self, agent: str, slug: str) -> Note:
        """One note (and remember that it was read, for the nightly pass)."""
        am = await self._agent(agent)
        check_slug(slug)
        text, mtime = await asyncio.to_thread(am.files.require, slug)
        await am.index.mark_read(slug, now())
        return _note(slug, parse(text, slug, mtime))

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
        """Create or replace the note whose slug derives from `title`."""
        am = await self._agent(agent)
        clean_title = self._clean_title(title)
        body = self._clean_body(content)
        clean_tags = self._clean_tags(tags)
        self._refuse_secrets(
            "memory",
            [("title", clean_title), ("content", body), ("tags", " ".join(clean_tags or ()))],
        )
        async with am.lock:
            await self._sync(am)
            slug = slugify(clean_title)
            existing = await asyncio.to_thread(am.files.read, slug)
            if existing is not None and not replace:
                slug = await asyncio.to_thread(self._free_slug, am.files, slug)
                existing = None
            old = parse(existing[0], slug, existing[1]) if existing else None
            return await self._write_note(
                am,
                slug,
                clean_title,
                body,
                clean_tags,
                provenance,
                old=old,
                before=existing[0] if existing else None,
            )

    @staticmethod
    def _free_slug(files: NoteFiles, slug: str) -> str:
        for number in range(2, 10_000):
            candidate = f"{slug[: 80 - len(str(number)) - 1]}-{number}"
            if files.read(candidate) is None:
                return candidate
        raise HabakkukError(f"memory: no free name for {slug!r}")

    async def _write_note(
        self,
        am: _AgentMemory,
        slug: str,
        title: str,
        body: str,
        tags: tuple[str, ...] | None,
        provenance: Provenance,
        *,
        old: Parsed | None,
        before: str | None,
        trust: Trust | None = None,
    ) -> SaveResult:
        """Write note `slug` (caller holds the lock); `old` is what it inherits from."""
        final_tags = tags if tags is not None else (old.tags if old else ())
        if trust is None:
            kept_mark = old is not None and old.trust == "untrusted" and provenance.by != "user"
            trust = "untrusted" if provenance.tainted or kept_mark else "trusted"
        if (
            before is not None
            and old is not None
            and old.framed
            and (old.title, old.tags, old.body.strip(), old.trust)
            == (title, final_tags, body.strip(), trust)
        ):
            return SaveResult(note=_note(slug, old), created=False, unchanged=True)
        if provenance.by == "review" and old is not None and before is not None:
            old_size = len(old.body.strip().encode("utf-8"))
            new_size = len(body.strip().encode("utf-8"))
            if new_size * 2 < old_size:
                raise ProposalCreated(
                    await am.history.propose(
                        action="save",
                        name=slug,
                        title=title,
                        content=body,
                        reason=f"shrinks note {slug!r} from {old_size:,} to {new_size:,} bytes",
                        provenance=provenance,
                    )
                )
        stamp = now()
        text = render(
            title=title,
            tags=final_tags,
            created=old.created if old else stamp,
            updated=stamp,
            source=provenance.by,
            session=provenance.session,
            trust=trust,
            body=body,
        )
        stat = await asyncio.to_thread(am.files.write, slug, text)
        await am.index.put(slug, text, stat.st_mtime_ns, stat.st_size)
        await am.history.record(
            kind="note",
            name=slug,
            path=am.files.relative(slug),
            before=before,
            after=text,
            provenance=provenance,
        )
        note = _note(slug, parse(text, slug, stat.st_mtime))
        return SaveResult(note=note, created=before is None)

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
        am = await self._agent(agent)
        check_slug(slug)
        clean_title = self._clean_title(title)
        body = self._clean_body(content)
        clean_tags = self._clean_tags(tags)
        self._refuse_secrets(
            "memory",
            [("title", clean_title), ("content", body), ("tags", " ".join(clean_tags or ()))],
        )
        async with am.lock:
            await self._sync(am)
            text, mtime = await asyncio.to_thread(am.files.require, slug)
            old = parse(text, slug, mtime)
            new_slug = slugify(clean_title)
            if new_slug == slug:
                return await self._write_note(
                    am, slug, clean_title, body, clean_tags, provenance, old=old, before=text
                )
            if await asyncio.to_thread(am.files.read, new_slug) is not None:
                raise HabakkukError(
                    f"memory: a note {new_slug!r} already exists; replace that one or choose "
                    "another title"
                )
            result = await self._write_note(
                am, new_slug, clean_title, body, clean_tags, provenance, old=old, before=None
            )
            await self._trash(am, slug, text, provenance)
            return result

    async def _trash(self, am: _AgentMemory, slug: str, text: str, provenance: Provenance) -> None:
        await asyncio.to_thread(am.files.trash, slug)
        await am.index.drop(slug)
        await am.history.record(
            kind="note",
            name=slug,
            path=am.files.relative(slug),
            before=text,
            after=None,
            provenance=provenance,
        )

    async def forget(self, agent: str, slug: str, *, provenance: Provenance) -> NoteSummary:
        """Move the note to memory/.trash/; NotFound when there is none."""
        am = await self._agent(agent)
        check_slug(slug)
        async with am.lock:
            await self._sync(am)
            text, mtime = await asyncio.to_thread(am.files.require, slug)
            parsed = parse(text, slug, mtime)
            if provenance.by == "review":
                raise ProposalCreated(
                    await am.history.propose(
                        action="forget",
                        name=slug,
                        title=parsed.title,
                        content="",
                        reason=f"forget note {slug!r} ({parsed.title})",
                        provenance=provenance,
                    )
                )
            await self._trash(am, slug, text, provenance)
        note = _note(slug, parsed)
        return NoteSummary(
            slug=note.slug,
            title=note.title,
            tags=note.tags,
            created=note.created,
            updated=note.updated,
            source=note.source,
            session=note.session,
            trust=note.trust,
        )

    async def trust(self, agent: str, slug: str, *, provenance: Provenance) -> Note:
        """The user vouches for a note: `trust: trusted` (refused for non-user provenance)."""
        am = await self._agent(agent)
        check_slug(slug)
        if provenance.by != "user" or provenance.tainted:
            raise HabakkukError(
                f"memory: only the user can vouch for a note (habakkuk memory trust {slug})"
            )
        async with am.lock:
            await self._sync(am)
            text, mtime = await asyncio.to_thread(am.files.require, slug)
            old = parse(text, slug, mtime)
            if old.trust == "trusted":
                return _note(slug, old)
            result = await self._write_note(
                am,
                slug,
                old.title,
                old.body,
                old.tags,
                provenance,
                old=old,
                before=text,
                trust="trusted",
            )
            return result.note

    # -- profile and identity ----------------------------------------------------------

    async def profile(self, agent: str) -> str:
        """USER.md as it is on disk ("" when there is none)."""
        am = await self._agent(agent)
        found = await asyncio.to_thread(_read_text, am.folder / PROFILE_FILE)
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
        self._refuse_secrets("user profile", [("section", str(section)), ("content", str(content))])
        async with am.lock:
            await self._sync(am)
            found = await asyncio.to_thread(_read_text, am.folder / PROFILE_FILE)
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
        am: _AgentMemory,
        kind: ChangeKind,
        name: str,
        before: str | None,
        text: str,
        provenance: Provenance,
        restores: str = "",
    ) -> Change | None:
        stat = await asyncio.to_thread(_write_file, am.folder / name, text)
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
        found = await asyncio.to_thread(_read_text, am.folder / IDENTITY_FILE)
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
        self._refuse_secrets(
            "identity", [("name", str(name)), ("emoji", str(emoji)), ("manner", str(manner))]
        )
        text = render_identity(str(name), str(emoji), str(manner))
        async with am.lock:
            await self._sync(am)
            found = await asyncio.to_thread(_read_text, am.folder / IDENTITY_FILE)
            before = found[0] if found else None
            if before != text:
                await self._write_other(am, "identity", IDENTITY_FILE, before, text, provenance)
        return text

    # -- history -----------------------------------------------------------------------

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
        async with am.lock:
            await self._sync(am)
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
            current_found = await asyncio.to_thread(_read_text, path)
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
                record_stat = None
            elif target is None:
                await asyncio.to_thread(path.unlink, missing_ok=True)
                record_stat = None
            else:
                record_stat = await asyncio.to_thread(_write_file, path, target)
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
        profile, profile_cut = cut(await self.profile(agent), PROFILE_CAP)
        return MemorySnapshot(
            notes=tuple(listed),
            more=total - len(listed),
            profile=profile,
            profile_cut=profile_cut,
            identity=await self.identity(agent),
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
                await self._sync(am)
                slug = check_slug(proposal.name)
                existing = await asyncio.to_thread(am.files.read, slug)
                old = parse(existing[0], slug, existing[1]) if existing else None
                await self._write_note(
                    am,
                    slug,
                    self._clean_title(proposal.title),
                    self._clean_body(proposal.content),
                    None,
                    user,
                    old=old,
                    before=existing[0] if existing else None,
                )
        else:
            self._refuse_secrets("proposal", [("content", proposal.content)])
            check_cap(proposal.content)
            async with am.lock:
                await self._sync(am)
                found = await asyncio.to_thread(_read_text, am.folder / PROFILE_FILE)
                before = found[0] if found else None
                if before != proposal.content:
                    await self._write_other(
                        am, "profile", PROFILE_FILE, before, proposal.content, user
                    )
        await am.history.close_proposal(proposal.id, "applied")
        return proposal
