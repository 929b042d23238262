"""One agent's open memory: its folder, note files, index, history and (optional) vectors.

`open_agent_memory` creates the notes folder (0700), opens memory.db and history.db and
starts watching the folder; `AgentMemory.close` releases all of it. The small file helpers
here read and write the agent's other files (USER.md, IDENTITY.md) off the event loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.store import SqliteDatabase

from .folder_watch import FolderWatch
from .frontmatter import Parsed
from .history import HISTORY_MIGRATIONS, History, Stat
from .index import INDEX_MIGRATIONS, Index
from .memory_types import Note
from .notes import NoteFiles, write_atomic

if TYPE_CHECKING:
    # numpy and the openai SDK load only when memory.embeddings is configured.
    from .embeddings import Embedder
    from .semantic import SemanticIndex


@dataclass
class AgentMemory:
    """The open resources of one agent's memory."""

    name: str
    folder: Path  # the agent's folder
    files: NoteFiles
    index: Index
    history: History
    semantic: SemanticIndex | None = None  # when memory.embeddings is configured
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # (mtime_ns, size) of USER.md and IDENTITY.md when last compared with the history
    # ((0, -1) when missing), so an idle sync does not read them again.
    seen: dict[str, tuple[int, int]] = field(default_factory=dict)

    def file(self, relative: str) -> Path:
        """A path of the history (USER.md, memory/x.md) inside the agent's folder."""
        path = (self.folder / relative).resolve()
        if not path.is_relative_to(self.folder.resolve()):
            raise HabakkukError(f"memory of {self.name}: {relative!r} is outside its folder")
        return path

    def embed_soon(self) -> None:
        """Embed what a write changed, in the background (no-op without embeddings)."""
        if self.semantic is not None:
            self.semantic.schedule()

    async def close(self) -> None:
        """Stop watching, stop embedding, close both databases."""
        if self.index.watch is not None:
            self.index.watch.close()
        if self.semantic is not None:
            await self.semantic.close()
        await self.index.db.close()
        await self.history.db.close()


async def open_agent_memory(
    folder: Path,
    agent: str,
    *,
    history_days: float,
    embedder: Callable[[], Embedder] | None = None,
) -> AgentMemory:
    """Open the memory kept in agent folder `folder`."""
    notes_dir = folder / "memory"

    def _prepare() -> None:
        notes_dir.mkdir(parents=True, exist_ok=True)
        # agents/, the agent's folder and its notes hold what it remembers: private, as
        # the home is (mkdir's default 0755 was a finding of `habakkuk security audit`).
        for private in (folder.parent, folder, notes_dir):
            os.chmod(private, 0o700)

    await asyncio.to_thread(_prepare)
    index_db = await SqliteDatabase.open(folder / "memory.db", INDEX_MIGRATIONS)
    try:
        history_db = await SqliteDatabase.open(folder / "history.db", HISTORY_MIGRATIONS)
    except BaseException:
        await index_db.close()
        raise
    files = NoteFiles(notes_dir)
    history = History(history_db, agent)
    await history.prune(history_days)
    # Watching starts before the first scan, so no edit falls between the two.
    index = Index(index_db, files, FolderWatch(notes_dir))
    semantic = None
    if embedder is not None:
        from .semantic import SemanticIndex

        semantic = SemanticIndex(index_db, embedder())
    return AgentMemory(agent, folder, files, index, history, semantic)


def note_of(slug: str, parsed: Parsed, *, partial: bool = False) -> Note:
    """A parsed note file as the Note value (`partial`: read only up to the cap)."""
    return Note(
        slug=slug,
        title=parsed.title,
        tags=parsed.tags,
        created=parsed.created,
        updated=parsed.updated,
        source=parsed.source,
        session=parsed.session,
        trust=parsed.trust,
        partial=partial,
        body=parsed.body,
    )


def read_text(path: Path) -> tuple[str, Stat] | None:
    """A file's text and (mtime, size) as read, or None when there is none."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            text = handle.read()
            stat = os.fstat(handle.fileno())
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    return text, Stat(stat.st_mtime_ns, stat.st_size)


def stat_of(path: Path) -> tuple[int, int] | None:
    """(mtime_ns, size) of a file, (0, -1) when it is missing, None when unreadable."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return (0, -1)
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def write_file(path: Path, text: str) -> Stat:
    """Write `path` atomically; its (mtime, size) afterwards."""
    write_atomic(path, text)
    stat = path.stat()
    return Stat(stat.st_mtime_ns, stat.st_size)
