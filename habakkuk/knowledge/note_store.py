"""The notes of every agent: files, index, history records, secret checks, one lock each.

The first half of the memory service (see service.py): what every write of a note goes
through. Per-agent resources open on first use (agent_memory.py) and close with `close()`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from habakkuk.engine.config import Config
from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.home import Home
from habakkuk.engine.store import SqliteDatabase

from .agent_memory import (
    AgentMemory,
    note_of,
    open_agent_memory,
    read_text,
    stat_of,
)
from .frontmatter import Parsed, now, parse, render
from .index import SyncResult
from .memory_types import (
    ChangeKind,
    MemoryHit,
    Note,
    NoteSummary,
    ProposalCreated,
    Provenance,
    ReindexStats,
    SaveResult,
    SecretRefused,
    Trust,
)
from .note_checks import checked_body, checked_tags, checked_title, given_tags
from .notes import NoteFiles, NoteText, check_slug, partial_note, slugify

log = logging.getLogger(__name__)

PROFILE_FILE = "USER.md"
IDENTITY_FILE = "IDENTITY.md"

SecretValues = Callable[[], Iterable[str] | Mapping[str, str]]

if TYPE_CHECKING:
    from .embeddings import Embedder


def refuse_partial(slug: str, found: NoteText) -> None:
    """HabakkukError when note `slug` was read only in part: rewriting it from what was
    read would cut it at the cap, so Habakkuk leaves such a note to the person's editor."""
    if found.partial:
        raise HabakkukError(
            f"memory: {partial_note(slug, found.size)}; Habakkuk does not rewrite it "
            "(split it into smaller notes by hand, or forget it)"
        )


class NoteStore:
    """The home's agents' notes: their files, index and history, behind one lock per agent.

    `Memory` adds the profile, the identity, the history's views and the proposals.
    """

    def __init__(
        self,
        home: Home,
        config: Config,
        secret_values: SecretValues,
        *,
        embedder: Callable[[], Embedder] | None = None,
    ):
        """`embedder` builds each agent's embedder when memory.embeddings is configured
        (notes are then embedded after writes and searched by meaning too)."""
        self.home = home
        self.config = config
        self._secret_values = secret_values
        self._embedder = embedder
        self._agents: dict[str, AgentMemory] = {}
        self._opening: asyncio.Lock | None = None
        # Syncs still running (see _synced), which close() lets end first.
        self._syncs: set[asyncio.Task[ReindexStats]] = set()
        self._ahead: asyncio.Task[None] | None = None  # open_ahead's

    # -- resources ---------------------------------------------------------------------

    async def _agent(self, agent: str) -> AgentMemory:
        if not isinstance(agent, str) or agent not in self.config.agents:
            known = ", ".join(sorted(self.config.agents)) or "none"
            raise NotFound.said("errors.memory.no_agent", agent=repr(agent), agents=known)
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

    async def _open(self, agent: str) -> AgentMemory:
        return await open_agent_memory(
            self.home.agent_dir(agent),
            agent,
            history_days=self.config.memory.history_days,
            embedder=self._embedder,
        )

    def open_ahead(self) -> None:
        """Start opening every configured agent's memory.db and history.db in the
        background: what the first call needing one would otherwise wait for (the files,
        their migrations check, the history's prune, the folder watch). Reads no table
        whole; idempotent. An agent that fails to open is logged and left to open (and
        fail) on first use."""
        if self._ahead is None:
            self._ahead = asyncio.get_running_loop().create_task(
                self._open_all(), name="memory:open-ahead"
            )

    async def _open_all(self) -> None:
        for agent in list(self.config.agents):
            try:
                await self._agent(agent)
            except Exception as exc:
                log.warning("memory of %s: could not open it ahead of use: %s", agent, exc)

    async def opened_ahead(self) -> frozenset[str]:
        """Wait until `open_ahead` has opened what it could (at once when not started);
        the agents whose memory databases are open."""
        if self._ahead is not None:
            await asyncio.shield(self._ahead)
        return frozenset(self._agents)

    async def database(self, agent: str) -> SqliteDatabase:
        """The agent's migrated memory.db (for the review and embeddings modules)."""
        return (await self._agent(agent)).index.db

    async def close(self) -> None:
        """Close every agent's databases, once the syncs still running have ended."""
        # A sync whose caller gave up runs on (see _synced): closed under it, it failed
        # on a closed database with no one to tell (a traceback at every shutdown that
        # cut a search short).
        if self._ahead is not None:  # waited for, not cancelled: a half-open agent would leak
            await asyncio.gather(self._ahead, return_exceptions=True)
        while self._syncs:
            for ended in await asyncio.gather(*self._syncs, return_exceptions=True):
                if isinstance(ended, Exception):
                    log.warning("memory: a sync before closing failed: %s", ended)
        agents, self._agents = list(self._agents.values()), {}
        for item in agents:
            await item.close()

    # -- checks ------------------------------------------------------------------------

    def secret_in(self, text: str) -> str | None:
        """What secret `text` holds ("an OpenAI key", ...), or None: the same check every
        write makes, for callers that must not even store a plan holding one (the review)."""
        from habakkuk.engine.secret_scan import find_secret

        return find_secret(text, self._secret_values())

    def _checked_note(
        self, title: str, content: str, tags: list[str] | None
    ) -> tuple[str, str, tuple[str, ...] | None]:
        """A note's title, body and tags as stored; HabakkukError or SecretRefused."""
        clean_title = checked_title(title)
        body = checked_body(content)
        clean_tags = checked_tags(tags)
        self._refuse_secrets(
            "memory",
            # The tags as given: normalising lowercases them, which would hide a key's shape.
            [("title", clean_title), ("content", body), ("tags", given_tags(tags))],
        )
        return clean_title, body, clean_tags

    def _refuse_secrets(self, what: str, fields: Iterable[tuple[str, str]]) -> None:
        # The scanner compiles a few dozen patterns as it loads: the first write pays for
        # them, not every start of a process that may never write a note.
        from habakkuk.engine.secret_scan import find_secret

        values = self._secret_values()
        for name, text in fields:
            found = find_secret(text, values)
            if found:
                raise SecretRefused.said("errors.memory.secret", what=what, field=name, found=found)

    # -- keeping the index and history up with the files ------------------------------

    async def _sync(
        self, am: AgentMemory, *, full: bool = False, only: tuple[str, ...] = ()
    ) -> ReindexStats:
        """Bring the index up to the files and record hand edits (caller holds the lock).

        `only`: the notes a write is about to change (the rest wait for the next search).
        """
        result = await am.index.sync(full=full, only=only)
        await self._record_seen(am, result)
        if only:
            return result.stats
        others: tuple[tuple[str, ChangeKind], ...] = (
            (PROFILE_FILE, "profile"),
            (IDENTITY_FILE, "identity"),
        )
        stats = await asyncio.to_thread(lambda: [stat_of(am.folder / name) for name, _ in others])
        for (name, kind), moved in zip(others, stats, strict=True):
            # Unmoved since this process last looked: nothing to compare (saves two hops).
            if moved is not None and am.seen.get(name) == moved:
                continue
            found = await asyncio.to_thread(read_text, am.folder / name)
            if moved is not None:
                am.seen[name] = moved
            await am.history.notice_file(
                kind=kind,
                name=name,
                path=name,
                text=found[0] if found else None,
                stat=found[1] if found else None,
            )
        return result.stats

    async def _synced(self, am: AgentMemory) -> ReindexStats:
        """Sync under the lock in a task of its own: a caller cancelled midway (a client
        that hung up, a screen's stale worker) cannot leave the index updated and the
        hand edit it noticed unrecorded."""

        async def run() -> ReindexStats:
            async with am.lock:
                return await self._sync(am)

        task = asyncio.ensure_future(run())
        self._syncs.add(task)
        task.add_done_callback(self._syncs.discard)
        return await asyncio.shield(task)

    async def catch_up(self, agent: str) -> ReindexStats:
        """Index the notes edited by hand since the last look, as a search would, and
        record them in the history (the hot reload's, services/hot_reload.py, on each
        edit); a caller cancelled midway leaves the sync to end on its own."""
        return await self._synced(await self._agent(agent))

    async def _record_seen(self, am: AgentMemory, result: SyncResult) -> None:
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
        await self._synced(am)
        return await am.index.listing(max(1, min(int(limit), 1000)), max(0, int(offset)))

    async def search(
        self, agent: str, query: str, *, tags: tuple[str, ...] = (), limit: int = 10
    ) -> list[MemoryHit]:
        """Ranked matches (every given tag required); [] for an empty query without tags."""
        am = await self._agent(agent)
        await self._synced(am)
        text, wanted = str(query or ""), tuple(tags)

        async def fts(depth: int) -> list[MemoryHit]:
            found = await am.index.search(text, wanted, depth)
            return [MemoryHit(note=note, snippet=snip, score=score) for note, snip, score in found]

        limit = max(1, min(int(limit), 100))
        if am.semantic is None:
            return await fts(limit)
        return await am.semantic.search(text, wanted, limit, fts)

    @property
    def embeddings_enabled(self) -> bool:
        """Whether notes are embedded (memory.embeddings is configured)."""
        return self._embedder is not None

    async def embed_pending(self, agent: str) -> int:
        """Catch up with hand edits: sync the index, embed notes without a vector."""
        am = await self._agent(agent)
        await self._synced(am)
        return 0 if am.semantic is None else await am.semantic.embed_pending()

    async def read(self, agent: str, slug: str, *, mark_read: bool = True) -> Note:
        """One note (and remember that it was read, for the nightly pass, unless
        `mark_read` is False: the review's own reading does not keep a note fresh)."""
        am = await self._agent(agent)
        check_slug(slug)
        found = await asyncio.to_thread(am.files.require, slug)
        if mark_read:
            await am.index.mark_read(slug, now())
        return note_of(slug, parse(found.text, slug, found.mtime), partial=found.partial)

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
        # Off the event loop: a 64,000-byte body made to be slow to scan takes ~0.2 s.
        clean_title, body, clean_tags = await asyncio.to_thread(
            self._checked_note, title, content, tags
        )
        async with am.lock:
            slug = slugify(clean_title)
            await self._sync(am, only=(slug,))
            existing = await asyncio.to_thread(am.files.read, slug)
            if existing is not None and not replace:
                slug = await asyncio.to_thread(self._free_slug, am.files, slug)
                existing = None
            if existing is not None:
                refuse_partial(slug, existing)
            old = parse(existing.text, slug, existing.mtime) if existing else None
            return await self._write_note(
                am,
                slug,
                clean_title,
                body,
                clean_tags,
                provenance,
                old=old,
                before=existing.text if existing else None,
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
        am: AgentMemory,
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
            return SaveResult(note=note_of(slug, old), created=False, unchanged=True)
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
        # Recorded first: a crash after this and before the index row repeats nothing in
        # the history (History.record knows a change it has, or one that never landed).
        change = await am.history.record(
            kind="note",
            name=slug,
            path=am.files.relative(slug),
            before=before,
            after=text,
            provenance=provenance,
        )
        try:
            stat = await asyncio.to_thread(am.files.write, slug, text)
        except Exception:
            if change is not None:  # the file was not written: nor was the change
                await am.history.withdraw(change)
            raise
        await am.index.put(slug, text, stat.st_mtime_ns, stat.st_size)
        am.embed_soon()
        note = note_of(slug, parse(text, slug, stat.st_mtime))
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
        # Off the event loop: a 64,000-byte body made to be slow to scan takes ~0.2 s.
        clean_title, body, clean_tags = await asyncio.to_thread(
            self._checked_note, title, content, tags
        )
        async with am.lock:
            new_slug = slugify(clean_title)
            await self._sync(am, only=(slug, new_slug))
            found = await asyncio.to_thread(am.files.require, slug)
            refuse_partial(slug, found)
            text = found.text
            old = parse(text, slug, found.mtime)
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

    async def _trash(self, am: AgentMemory, slug: str, text: str, provenance: Provenance) -> None:
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
            await self._sync(am, only=(slug,))
            found = await asyncio.to_thread(am.files.require, slug)
            # Over the cap, `text` is the note's beginning: the history keeps that, and
            # the whole file goes to the trash.
            text = found.text
            parsed = parse(text, slug, found.mtime)
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
        note = note_of(slug, parsed)
        return NoteSummary(
            slug=note.slug,
            title=note.title,
            tags=note.tags,
            created=note.created,
            updated=note.updated,
            source=note.source,
            session=note.session,
            trust=note.trust,
            partial=found.partial,
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
            await self._sync(am, only=(slug,))
            found = await asyncio.to_thread(am.files.require, slug)
            text = found.text
            old = parse(text, slug, found.mtime)
            if old.trust == "trusted":
                return note_of(slug, old, partial=found.partial)
            refuse_partial(slug, found)
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
