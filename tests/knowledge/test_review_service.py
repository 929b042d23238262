"""The review on the real memory service, started by the runtime's maintenance workers."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from habakkuk.engine.llm.types import Message, ToolResultBlock, ToolUseBlock
from habakkuk.knowledge.memory_types import Provenance
from tests.fakes.model_server import FakeModelServer, Reply
from tests.helpers import eventually

CONFIG = (
    "providers:\n  remote:\n    type: openai\n    base_url: {url}/v1\n    key_env: REMOTE_KEY\n"
    "agents:\n  main:\n    model: remote/gpt-fake\n  other:\n    model: remote/gpt-fake\n"
    'memory:\n  review: true\n  review_idle: 1s\n  nightly: "off"\n'
)


@pytest.fixture
def srv(model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    monkeypatch.setenv("REMOTE_KEY", "k")
    return model_server


async def test_serve_reviews_a_quiet_session_into_the_real_memory(
    runtime_factory: Any, srv: FakeModelServer
) -> None:
    runtime = await runtime_factory(CONFIG.format(url=srv.base_url))
    memory = runtime.memory
    user = Provenance(by="user")
    await memory.save("main", "Coffee beans", "Ethiopian", provenance=user)
    await memory.save("main", "Coffee grinder", "Burr", provenance=user)
    session = await runtime.sessions.new_session("main")
    for message in [
        Message.user_text("Coffee: I switched to a hand grinder; my name is Ada"),
        Message("assistant", [ToolUseBlock("c1", "fetch_url", {"url": "http://x"})]),
        Message("user", [ToolResultBlock("c1", "Kenyan beans are on sale")]),
    ]:
        await runtime.transcripts.append(session.id, message, turn_id="t")
    # The session went quiet a minute ago (raw SQL: appends always stamp "now").
    await runtime.transcripts.db.write(
        lambda conn: conn.execute("UPDATE sessions SET updated_at = updated_at - 60")
    )
    key = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
    changes = [
        {"op": "save", "title": "Bean sale", "content": "Kenyan beans on sale", "from": "tool"},
        {"op": "save", "title": "API key", "content": f"key {key}", "from": "user"},
        {
            "op": "merge",
            "slugs": ["coffee-beans", "coffee-grinder"],
            "title": "Coffee beans",
            "content": "Ethiopian beans; a hand burr grinder",
            "from": "user",
        },
        {"op": "profile", "section": "Name", "content": "Ada", "from": "user"},
        {"op": "profile", "section": "Shopping", "content": "Kenyan sale", "from": "tool"},
    ]
    srv.script(Reply(text=json.dumps({"changes": changes})))
    runtime.start_workers(channels=False, maintenance=True)
    job_id = f"memrev_{session.id}_3"

    async def done() -> bool:
        job = await runtime.queue.get(job_id)
        return job is not None and job.status == "done"

    await eventually(done, what="the review job")
    job = await runtime.queue.get(job_id)
    assert job.result["outcomes"] == {
        "applied": 2,
        "merged; forgetting the rest proposed to the user": 1,
    }
    assert job.result["dropped"] == {
        "profile change not stated by the user": 1,
        "looked like a secret": 1,
    }
    sale = await memory.read("main", "bean-sale")
    assert sale.trust == "untrusted" and sale.source == "review"
    assert (await memory.read("main", "coffee-beans")).body.startswith("Ethiopian beans;")
    # Forgetting the merged-away note is the user's call.
    [proposal] = await memory.proposals("main")
    assert (proposal.action, proposal.name) == ("forget", "coffee-grinder")
    assert "Ada" in await memory.profile("main") and "Kenyan" not in await memory.profile("main")
    agent_dir = runtime.home.agent_dir("main")
    for path in [*agent_dir.rglob("*.md"), *agent_dir.glob("*.db*")]:
        assert key.encode() not in path.read_bytes(), path
    assert (await memory.list_notes("other"))[1] == 0  # the other agent is untouched


def hand_note(title: str, updated: str, tags: str = "[]") -> str:
    return (
        f'---\ntitle: {title}\ntags: {tags}\ncreated: "{updated}"\nupdated: "{updated}"\n---\n\n'
        f"{title} body\n"
    )


async def test_the_nightly_pass_proposes_archiving_stale_notes_but_not_kept_or_read_ones(
    runtime_factory: Any, srv: FakeModelServer
) -> None:
    config = CONFIG.format(url=srv.base_url).replace(
        'review: true\n  review_idle: 1s\n  nightly: "off"', 'nightly: "00:00"\n  stale_days: 30'
    )
    runtime = await runtime_factory(config)
    folder = runtime.home.agent_dir("main") / "memory"
    folder.mkdir(parents=True, exist_ok=True)
    old = "2020-01-01T00:00:00Z"
    (folder / "old-trip.md").write_text(hand_note("Old trip", old))
    (folder / "old-pinned.md").write_text(hand_note("Old pinned", old, "[pinned]"))
    (folder / "old-but-read.md").write_text(hand_note("Old but read", old))
    await runtime.memory.reindex("main")
    await runtime.memory.read("main", "old-but-read")  # memory_read keeps it fresh
    runtime.start_workers(channels=False, maintenance=True)

    today = datetime.now(ZoneInfo(runtime.config.timezone)).date().isoformat()
    job_id = f"memnight_main_{today}"

    async def done() -> bool:
        job = await runtime.queue.get(job_id)
        return job is not None and job.status == "done"

    await eventually(done, what="the nightly job")
    [proposal] = await runtime.memory.proposals("main")
    assert (proposal.action, proposal.name, proposal.by) == ("forget", "old-trip", "review")
    assert sorted(p.name for p in folder.glob("*.md")) == [
        "old-but-read.md",
        "old-pinned.md",
        "old-trip.md",
    ]
    assert srv.requests == []  # no clusters: no model call
    assert job_id in (folder / ".review.log").read_text()


async def test_the_nightly_pass_sees_every_note_not_only_the_first_page(
    runtime_factory: Any, srv: FakeModelServer
) -> None:
    config = CONFIG.format(url=srv.base_url).replace(
        'review: true\n  review_idle: 1s\n  nightly: "off"', 'nightly: "00:00"\n  stale_days: 30'
    )
    runtime = await runtime_factory(config)
    folder = runtime.home.agent_dir("main") / "memory"
    folder.mkdir(parents=True, exist_ok=True)
    fresh = datetime.now(ZoneInfo("UTC")).strftime("%Y-%m-%dT%H:%M:%SZ")
    for number in range(1_100):  # more than one listing page (1,000)
        (folder / f"fresh-{number}.md").write_text(hand_note(f"Fresh {number}", fresh))
    (folder / "old-trip.md").write_text(hand_note("Old trip", "2020-01-01T00:00:00Z"))
    await runtime.memory.reindex("main")
    runtime.start_workers(channels=False, maintenance=True)
    today = datetime.now(ZoneInfo(runtime.config.timezone)).date().isoformat()

    async def done() -> bool:
        job = await runtime.queue.get(f"memnight_main_{today}")
        return job is not None and job.status == "done"

    await eventually(done, what="the nightly job")
    assert [p.name for p in await runtime.memory.proposals("main")] == ["old-trip"]
