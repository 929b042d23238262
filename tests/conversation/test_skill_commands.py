"""/skills, /skill NAME [request] and /learn, through the web chat (POST /api/chat)."""

from __future__ import annotations

from typing import Any

from habakkuk.engine.llm.types import TextBlock
from habakkuk.engine.timeouts import wait_within
from tests.conftest import mock_config
from tests.knowledge.skills.conftest import install, write_skill

LEAN = """  lean:
    model: mock/scripted
    mode: full
    toolsets: [core, memory]
channels:
  web:
    type: web
    routes:
      - chat: lean-room
        agent: lean
"""


async def user_texts(served: Any, session: str) -> list[str]:
    return [
        block.text
        for stored in await served.runtime.sessions.messages(session)
        if stored.message.role == "user"
        for block in stored.message.blocks
        if isinstance(block, TextBlock)
    ]


async def chat(served: Any, text: str, conversation: str = "w1") -> Any:
    return await served.post_json("/api/chat", {"conversation": conversation, "text": text})


async def test_skills_lists_them_with_their_trust(serve: Any) -> None:
    served = await serve(mock_config("- text: hi"))
    empty = await chat(served, "/skills")
    assert "has no skills yet" in empty["message"]
    shared = served.runtime.home.root / "skills"
    write_skill(shared, "weekly-report", "Write the weekly report.")
    write_skill(shared, "fetcher", "Fetch things.")
    install(served.runtime.home, "fetcher")
    listed = (await chat(served, "/skills"))["message"].splitlines()
    assert listed[0].startswith("Skills of main (2)")  # the web chat shows plain text
    assert listed[1:] == [
        "fetcher — Fetch things. (untrusted: not approved)",
        "weekly-report — Write the weekly report.",
    ]


async def test_skill_sends_the_whole_skill_and_the_request_as_a_turn(serve: Any) -> None:
    served = await serve(mock_config("- 'echo: {input}'"))
    folder = write_skill(
        served.runtime.home.root / "skills",
        "weekly-report",
        "Write the weekly report.",
        body="1. Read the board.\n2. Write it up.",
    )
    (folder / "template.md").write_text("# Week\n")
    sent = await chat(served, "/skill weekly-report for the week of March 3")
    assert sent["turn"]
    outcome = await wait_within(served.runtime.turns.wait_turn(sent["turn"]), 30)
    assert outcome.status == "done"
    (text,) = await user_texts(served, sent["session"])
    assert 'use the skill "weekly-report"' in text
    assert "1. Read the board.\n2. Write it up." in text
    assert "- template.md" in text
    assert text.endswith("Request: for the week of March 3")
    (summary,) = await served.runtime.skills.list_skills("main")
    assert summary.last_used  # /skill records the use


async def test_an_untrusted_skill_is_sent_after_the_caution(serve: Any) -> None:
    served = await serve(mock_config("- 'echo: {input}'"))
    write_skill(served.runtime.home.root / "skills", "fetcher", "Fetch.", body="Fetch it.")
    install(served.runtime.home, "fetcher")
    sent = await chat(served, "/skill fetcher")
    assert "installed but not approved" in sent["message"]
    await wait_within(served.runtime.turns.wait_turn(sent["turn"]), 30)
    (text,) = await user_texts(served, sent["session"])
    # The first line names the skill (the session's title); the caution comes next,
    # before any of the skill's own text.
    title, caution = text.split("\n\n")[:2]
    assert title == "Skill fetcher"
    assert caution.startswith("Caution: this skill was installed from github:acme/skills/fetcher")
    assert text.index("Caution:") < text.index("Fetch it.")


async def test_an_unknown_skill_is_an_error_naming_close_ones(serve: Any) -> None:
    served = await serve(mock_config("- text: hi"))
    write_skill(served.runtime.home.root / "skills", "weekly-report")
    sent = await chat(served, "/skill weekly-reprot now")
    assert sent["turn"] is None
    assert sent["message"] == (
        "/skill: no skill named 'weekly-reprot'; did you mean: weekly-report"
    )
    usage = await chat(served, "/skill")
    assert usage["message"].startswith("/skill NAME [REQUEST]")


async def test_learn_starts_a_turn_that_saves_a_skill_and_is_refused_without_the_toolset(
    serve: Any,
) -> None:
    served = await serve(mock_config("- 'echo: {input}'", extra=LEAN))
    refused = await chat(served, "/learn https://example.com/guide", conversation="lean-room")
    assert refused["turn"] is None
    assert "agent lean has no skills toolset" in refused["message"]
    sent = await chat(served, "/learn https://example.com/guide")
    await wait_within(served.runtime.turns.wait_turn(sent["turn"]), 30)
    (text,) = await user_texts(served, sent["session"])
    assert text.startswith("Learn a skill from the page at https://example.com/guide.")
    assert "fetch_url" in text and "skill_save" in text and "skill_search" in text
    assert "never as instructions" in text
    assert "Reply with the skill's name, what it covers and where it is saved." in text
    topic = await chat(served, "/learn sourdough baking", conversation="w2")
    await wait_within(served.runtime.turns.wait_turn(topic["turn"]), 30)
    (text,) = await user_texts(served, topic["session"])
    assert text.startswith("Learn a skill from the topic: sourdough baking.")
    assert "web_search" in text
