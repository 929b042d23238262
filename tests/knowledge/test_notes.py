"""Notes are files: frontmatter, slugs, atomic writes, the trash, trust marks."""

from __future__ import annotations

import asyncio
import os
import types

import pytest

from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.home import Home
from habakkuk.knowledge.frontmatter import parse
from habakkuk.knowledge.memory_types import MemoryAccess
from habakkuk.knowledge.notes import slugify
from habakkuk.knowledge.service import Memory
from tests.helpers import eventually

from .conftest import AGENT, TAINTED, USER


def test_the_service_satisfies_the_protocol(memory: Memory) -> None:
    access: MemoryAccess = memory
    assert access is memory


async def test_a_saved_note_is_a_file_with_the_specs_frontmatter(
    memory: Memory, home: Home
) -> None:
    result = await memory.save(
        "main", "Coffee preference", "Flat white with oat milk.", tags=["Food"], provenance=AGENT
    )
    assert result.created and result.note.slug == "coffee-preference"
    text = (home.agent_dir("main") / "memory" / "coffee-preference.md").read_text()
    assert text.startswith('---\ntitle: "Coffee preference"\ntags: ["food"]\ncreated: "')
    assert 'source: "agent"\nsession: "s1"\ntrust: trusted\n---\n\nFlat white' in text
    note = await memory.read("main", "coffee-preference")
    assert (note.title, note.tags, note.body) == (
        "Coffee preference",
        ("food",),
        "Flat white with oat milk.",
    )


async def test_an_update_keeps_created_and_tags_and_an_equal_save_writes_nothing(
    memory: Memory, home: Home
) -> None:
    first = await memory.save("main", "Tea", "Green.", tags=["drinks"], provenance=AGENT)
    path = home.agent_dir("main") / "memory" / "tea.md"
    path.write_text(path.read_text().replace(first.note.created, "2020-01-01T00:00:00Z"))
    second = await memory.save("main", "Tea", "Green, no sugar.", provenance=AGENT)
    assert not second.created and second.note.created == "2020-01-01T00:00:00Z"
    assert second.note.tags == ("drinks",)
    before = path.stat().st_mtime_ns
    again = await memory.save("main", "Tea", "Green, no sugar.", provenance=AGENT)
    assert again.unchanged and path.stat().st_mtime_ns == before


async def test_a_file_without_frontmatter_is_a_note_titled_by_its_name(
    memory: Memory, home: Home
) -> None:
    folder = home.agent_dir("main") / "memory"
    folder.mkdir(parents=True)
    (folder / "shopping-list.md").write_text("Eggs, milk and bread.\n")
    (folder / "broken.md").write_text("---\ntitle: [unclosed\n---\nBody of broken.\n")
    os.utime(folder / "shopping-list.md", (1_700_000_000, 1_700_000_000))
    note = await memory.read("main", "shopping-list")
    assert note.title == "Shopping list" and note.body == "Eggs, milk and bread."
    assert note.updated == "2023-11-14T22:13:20Z"
    broken = await memory.read("main", "broken")
    assert broken.title == "Broken" and broken.body.startswith("---\ntitle: [unclosed")
    hits = await memory.search("main", "bread")
    assert [h.note.slug for h in hits] == ["shopping-list"]


def test_slugs_are_lower_case_ascii_words_never_empty_and_at_most_80_chars() -> None:
    assert slugify("Café au lait: 2 shots!") == "cafe-au-lait-2-shots"
    assert slugify("...") == "note"
    assert slugify(".hidden") == "hidden"
    long = slugify("word " * 40)
    assert len(long) <= 80 and not long.endswith("-")


@pytest.mark.parametrize(
    "slug", ["../x", "/etc/passwd", ".trash", "a/../../b", "..", "A", "x/y", "", "note\x00"]
)
async def test_slugs_that_could_leave_the_folder_are_refused(memory: Memory, slug: str) -> None:
    with pytest.raises(HabakkukError, match="not a note name"):
        await memory.read("main", slug)
    with pytest.raises(HabakkukError, match="not a note name"):
        await memory.forget("main", slug, provenance=USER)


async def test_forget_moves_the_note_to_the_trash_and_search_no_longer_finds_it(
    memory: Memory, home: Home
) -> None:
    await memory.save("main", "Old address", "12 Elm Street", provenance=AGENT)
    gone = await memory.forget("main", "old-address", provenance=USER)
    assert gone.title == "Old address"
    folder = home.agent_dir("main") / "memory"
    assert not (folder / "old-address.md").exists()
    trashed = list((folder / ".trash").iterdir())
    assert len(trashed) == 1 and trashed[0].name.startswith("old-address-")
    assert await memory.search("main", "Elm") == []
    with pytest.raises(NotFound):
        await memory.forget("main", "old-address", provenance=USER)
    listed, total = await memory.list_notes("main")
    assert (listed, total) == ([], 0)


async def test_replace_with_a_new_title_moves_the_note_to_its_new_slug(
    memory: Memory, home: Home
) -> None:
    await memory.save("main", "Car", "Blue Fiat", tags=["things"], provenance=AGENT)
    result = await memory.replace("main", "car", "Car model", "Blue Fiat Panda", provenance=AGENT)
    assert result.note.slug == "car-model" and result.note.tags == ("things",)
    folder = home.agent_dir("main") / "memory"
    assert not (folder / "car.md").exists() and (folder / "car-model.md").exists()
    with pytest.raises(NotFound):
        await memory.replace("main", "car", "Car", "x", provenance=AGENT)


async def test_remember_never_replaces_a_note_with_the_same_title(memory: Memory) -> None:
    await memory.save("main", "Idea", "First", provenance=USER)
    second = await memory.save("main", "Idea", "Second", provenance=USER, replace=False)
    assert second.created and second.note.slug == "idea-2"
    assert (await memory.read("main", "idea")).body == "First"


async def test_a_tainted_save_is_untrusted_until_the_user_vouches(
    memory: Memory, home: Home
) -> None:
    saved = await memory.save("main", "Rumour", "From a web page.", provenance=TAINTED)
    assert saved.note.trust == "untrusted"
    rewritten = await memory.save("main", "Rumour", "Rewritten by the agent.", provenance=AGENT)
    assert rewritten.note.trust == "untrusted"
    with pytest.raises(HabakkukError, match="only the user"):
        await memory.trust("main", "rumour", provenance=AGENT)
    vouched = await memory.trust("main", "rumour", provenance=USER)
    assert vouched.trust == "trusted"
    text = (home.agent_dir("main") / "memory" / "rumour.md").read_text()
    assert parse(text, "rumour", 0).trust == "trusted" and "trust: trusted" in text
    assert (await memory.read("main", "rumour")).trust == "trusted"


async def test_an_unknown_agent_is_a_clear_error(memory: Memory) -> None:
    with pytest.raises(NotFound, match="agent 'ghost' is not configured"):
        await memory.list_notes("ghost")


async def test_bad_input_is_a_one_line_error(memory: Memory) -> None:
    with pytest.raises(HabakkukError, match="title is empty"):
        await memory.save("main", "  ", "x", provenance=AGENT)
    with pytest.raises(HabakkukError, match="content is empty"):
        await memory.save("main", "T", "\n\n", provenance=AGENT)
    with pytest.raises(HabakkukError, match="over 64,000 bytes"):
        await memory.save("main", "T", "x" * 70_000, provenance=AGENT)


async def test_closing_lets_a_sync_whose_caller_gave_up_end_before_the_databases_close(
    memory: Memory,
) -> None:
    await memory.save("main", "Tea", "Green.", provenance=AGENT)

    def is_sync(task: asyncio.Task[object]) -> bool:
        coro = task.get_coro()
        return isinstance(coro, types.CoroutineType) and "_synced" in coro.__qualname__

    def syncs() -> list[asyncio.Task[object]]:
        return [t for t in asyncio.all_tasks() if is_sync(t)]

    # A listing's sync waits behind one in progress (the agent's lock is held), and the
    # listing is given up on (a client that hung up, a shutdown)...
    agent = await memory._agent("main")
    async with agent.lock:
        listing = asyncio.create_task(memory.list_notes("main"))
        await eventually(syncs, what="the listing's sync to wait for the lock")
        [sync] = syncs()
        listing.cancel()
        await asyncio.gather(listing, return_exceptions=True)
    # ...then the memory closes: the sync (shielded, so it runs on) ends first, unfailed.
    await memory.close()
    assert sync.done() and sync.exception() is None
