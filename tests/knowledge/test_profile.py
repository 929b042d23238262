"""USER.md sections, its cap, IDENTITY.md, taint, the snapshot, two agents kept apart."""

from __future__ import annotations

import pytest

from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.home import Home
from habakkuk.knowledge.memory_types import TaintRefused
from habakkuk.knowledge.service import Memory

from .conftest import AGENT, TAINTED, USER


async def test_profile_sections_append_skip_repeats_replace_and_remove(memory: Memory) -> None:
    assert await memory.profile("main") == ""
    await memory.update_profile("main", "Food", "Vegetarian.", provenance=AGENT)
    await memory.update_profile("main", "Food", "Vegetarian.", provenance=AGENT)
    text = await memory.update_profile("main", "Work", "Nurse, night shifts.", provenance=AGENT)
    assert text == "## Food\nVegetarian.\n\n## Work\nNurse, night shifts.\n"
    text = await memory.update_profile("main", "food", "Likes curry.", provenance=AGENT)
    assert text.startswith("## Food\nVegetarian.\nLikes curry.\n\n## Work")
    text = await memory.update_profile("main", "Work", "Teacher.", mode="replace", provenance=AGENT)
    assert "## Work\nTeacher.\n" in text and "Nurse" not in text
    text = await memory.update_profile("main", "Food", "", mode="remove", provenance=AGENT)
    assert text == "## Work\nTeacher.\n"
    assert await memory.profile("main") == text


async def test_a_profile_change_over_the_cap_is_refused(memory: Memory) -> None:
    await memory.update_profile("main", "Notes", "x" * 5_900, provenance=AGENT)
    with pytest.raises(HabakkukError, match="over its 6,000-byte cap"):
        await memory.update_profile("main", "More", "y" * 200, provenance=AGENT)
    assert "y" not in await memory.profile("main")


async def test_a_tainted_turn_cannot_change_the_profile_or_the_identity(
    memory: Memory, home: Home
) -> None:
    with pytest.raises(TaintRefused):
        await memory.update_profile("main", "Food", "Eats anything.", provenance=TAINTED)
    with pytest.raises(TaintRefused):
        await memory.set_identity("main", "Evil", "😈", "obeys the web page", provenance=TAINTED)
    assert not (home.agent_dir("main") / "USER.md").exists()
    assert not (home.agent_dir("main") / "IDENTITY.md").exists()


async def test_identity_is_written_and_read_back(memory: Memory) -> None:
    text = await memory.set_identity("main", "Wren", "🐦", "Brief and warm.", provenance=AGENT)
    assert text == "# Identity\n\n- Name: Wren\n- Emoji: 🐦\n- Manner: Brief and warm.\n"
    assert await memory.identity("main") == text
    with pytest.raises(HabakkukError, match="name is empty"):
        await memory.set_identity("main", " ", "", "", provenance=AGENT)


async def test_the_snapshot_lists_the_newest_50_within_4kb_and_counts_the_rest(
    memory: Memory, home: Home
) -> None:
    for number in range(60):
        await memory.save("main", f"Note number {number:02}", "body", provenance=AGENT)
    await memory.save("main", "Fresh rumour", "web", provenance=TAINTED)
    snapshot = await memory.snapshot("main")
    assert len(snapshot.notes) == 50 and snapshot.more == 11
    assert snapshot.notes[0].slug == "fresh-rumour" and snapshot.notes[0].untrusted
    await memory.save("main", "T" * 190, "long title", provenance=AGENT)
    for number in range(30):
        await memory.save("main", f"{number} {'Long title ' * 15}", "b", provenance=AGENT)
    capped = await memory.snapshot("main")
    lines = "".join(f"- {n.title} ({n.slug})\n" for n in capped.notes)
    assert len(lines.encode()) <= 4_096 and len(capped.notes) < 50
    assert capped.more == 92 - len(capped.notes)


async def test_the_snapshot_cuts_a_hand_edited_profile_visibly(memory: Memory, home: Home) -> None:
    (home.agent_dir("main")).mkdir(parents=True, exist_ok=True)
    (home.agent_dir("main") / "USER.md").write_text("## Long\n" + "é" * 4_000)
    snapshot = await memory.snapshot("main")
    assert snapshot.profile_cut and len(snapshot.profile.encode()) <= 6_000
    await memory.set_identity("main", "Wren", "", "", provenance=USER)
    assert (await memory.snapshot("main")).identity.startswith("# Identity")


async def test_two_agents_are_isolated(memory: Memory, home: Home) -> None:
    await memory.save("main", "Secret plan", "Only main knows.", provenance=AGENT)
    await memory.update_profile("main", "About", "Main's user.", provenance=AGENT)
    other = home.agent_dir("other")
    assert not (other / "memory" / "secret-plan.md").exists()
    assert await memory.search("other", "plan") == []
    assert await memory.profile("other") == ""
    assert (await memory.list_notes("other"))[1] == 0
    await memory.save("other", "Secret plan", "Other's own.", provenance=AGENT)
    assert (await memory.read("main", "secret-plan")).body == "Only main knows."
    assert [c.name for c in await memory.history("other")] == ["secret-plan"]
    names = sorted(p.name for p in (home.agent_dir("main") / "memory").iterdir())
    assert names == ["secret-plan.md"]
