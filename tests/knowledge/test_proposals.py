"""The review may not delete a note, empty USER.md or halve a note alone: it proposes."""

from __future__ import annotations

import sqlite3

import pytest

from habakkuk.engine.errors import NotFound
from habakkuk.engine.home import Home
from habakkuk.knowledge.memory_types import ProposalCreated, SecretRefused
from habakkuk.knowledge.service import Memory

from .conftest import AGENT, REVIEW, USER


async def test_a_review_delete_becomes_a_proposal_the_user_applies(
    memory: Memory, home: Home
) -> None:
    await memory.save("main", "Old job", "Worked at Acme.", provenance=AGENT)
    with pytest.raises(ProposalCreated) as raised:
        await memory.forget("main", "old-job", provenance=REVIEW)
    proposal = raised.value.proposal
    assert (proposal.action, proposal.name, proposal.by) == ("forget", "old-job", "review")
    assert (home.agent_dir("main") / "memory" / "old-job.md").exists()
    assert [p.id for p in await memory.proposals("main")] == [proposal.id]
    await memory.resolve_proposal("main", proposal.id, apply=True, provenance=USER)
    assert not (home.agent_dir("main") / "memory" / "old-job.md").exists()
    assert await memory.proposals("main") == []
    newest = (await memory.history("main"))[0]
    assert (newest.op, newest.by) == ("deleted", "user")
    assert newest.note == f"applied proposal {proposal.id}"
    with pytest.raises(NotFound):
        await memory.resolve_proposal("main", proposal.id, apply=True, provenance=USER)


async def test_a_review_that_halves_a_note_proposes_and_a_dismissal_keeps_it(
    memory: Memory,
) -> None:
    body = "Detailed notes about the garden. " * 20
    await memory.save("main", "Garden", body, provenance=AGENT)
    with pytest.raises(ProposalCreated) as raised:
        await memory.save("main", "Garden", "Garden.", provenance=REVIEW)
    assert (await memory.read("main", "garden")).body.strip() == body.strip()
    shrink = await memory.save("main", "Garden", body + " And roses.", provenance=REVIEW)
    assert not shrink.unchanged  # growing or modest edits go through
    await memory.resolve_proposal("main", raised.value.proposal.id, apply=False, provenance=USER)
    assert await memory.proposals("main") == []
    assert "roses" in (await memory.read("main", "garden")).body


async def test_an_applied_shrink_proposal_writes_the_proposed_text(memory: Memory) -> None:
    await memory.save("main", "Garden", "Long text. " * 30, provenance=AGENT)
    with pytest.raises(ProposalCreated) as raised:
        await memory.save("main", "Garden", "Short.", provenance=REVIEW)
    await memory.resolve_proposal("main", raised.value.proposal.id, apply=True, provenance=USER)
    note = await memory.read("main", "garden")
    assert note.body == "Short." and note.source == "user"


async def test_a_review_that_empties_user_md_proposes(memory: Memory, home: Home) -> None:
    await memory.update_profile("main", "Food", "Vegan.", provenance=USER)
    with pytest.raises(ProposalCreated) as raised:
        await memory.update_profile("main", "Food", "", mode="remove", provenance=REVIEW)
    assert await memory.profile("main") == "## Food\nVegan.\n"
    assert raised.value.proposal.action == "profile"
    await memory.resolve_proposal("main", raised.value.proposal.id, apply=True, provenance=USER)
    assert await memory.profile("main") == ""


async def test_the_same_proposal_twice_is_stored_once(memory: Memory) -> None:
    await memory.save("main", "Dup", "text", provenance=AGENT)
    for _ in range(2):
        with pytest.raises(ProposalCreated):
            await memory.forget("main", "dup", provenance=REVIEW)
    assert len(await memory.proposals("main")) == 1


async def test_applying_a_proposal_is_checked_for_secrets(memory: Memory, home: Home) -> None:
    await memory.save("main", "Creds", "Long text. " * 30, provenance=AGENT)
    with pytest.raises(ProposalCreated) as raised:
        await memory.save("main", "Creds", "Short.", provenance=REVIEW)
    # Tamper with the stored proposal (as a crafted history.db could).
    with sqlite3.connect(home.agent_dir("main") / "history.db") as conn:
        conn.execute(
            "UPDATE proposals SET content = 'password: hunter2-blue' WHERE id = ?",
            (raised.value.proposal.id,),
        )
    with pytest.raises(SecretRefused):
        await memory.resolve_proposal("main", raised.value.proposal.id, apply=True, provenance=USER)
    assert b"hunter2" not in (home.agent_dir("main") / "memory" / "creds.md").read_bytes()
