"""Sessions read the agent's files when they start; the welcome is taken once, by a chat."""

from __future__ import annotations

import asyncio

from habakkuk.engine.home import Home
from tests.conftest import OpenRuntime, mock_config


async def test_two_chats_opening_at_once_welcome_once(
    runtime_factory: OpenRuntime, home: Home
) -> None:
    runtime = await runtime_factory(mock_config())
    first, second = await asyncio.gather(
        runtime.sessions.new_session(origin="tui", chat=True),
        runtime.sessions.new_session(origin="channel:telegram", chat=True),
    )
    welcomed = ["# Welcome" in s.system_prompt for s in (first, second)]
    assert sorted(welcomed) == [False, True]
    assert (home.agent_dir("main") / ".onboarding").exists()
    third = await runtime.sessions.new_session(origin="tui", chat=True)
    assert "# Welcome" not in third.system_prompt  # ignored questions are not asked again


async def test_automated_sessions_never_take_the_welcome(
    runtime_factory: OpenRuntime, home: Home
) -> None:
    runtime = await runtime_factory(mock_config())
    for origin in ("webhook", "api", "cli", "mcp"):
        session = await runtime.sessions.new_session(origin=origin)
        assert "# Welcome" not in session.system_prompt
    assert not (home.agent_dir("main") / ".onboarding").exists()
    chat = await runtime.sessions.new_session(
        origin="tui", chat=True
    )  # still there for the first chat
    assert "# Welcome" in chat.system_prompt


async def test_an_agent_that_knows_its_user_skips_the_welcome(
    runtime_factory: OpenRuntime, home: Home
) -> None:
    runtime = await runtime_factory(mock_config())
    folder = home.agent_dir("main")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "USER.md").write_text("## Name\nAda\n", encoding="utf-8")
    session = await runtime.sessions.new_session(origin="tui", chat=True)
    assert "# Welcome" not in session.system_prompt
    assert "# About the user\n## Name\nAda" in session.system_prompt
    assert not (folder / ".onboarding").exists()


async def test_edits_to_the_agent_files_reach_the_next_session(
    runtime_factory: OpenRuntime, home: Home
) -> None:
    runtime = await runtime_factory(mock_config())
    folder = home.agent_dir("main")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SOUL.md").write_text("You are Marvin.", encoding="utf-8")
    (folder / "AGENTS.md").write_text("Reply in haiku.", encoding="utf-8")
    before = await runtime.sessions.new_session()
    (folder / "SOUL.md").write_text("You are Zaphod.", encoding="utf-8")
    after = await runtime.sessions.new_session()
    assert before.system_prompt.startswith("You are Marvin.")
    assert after.system_prompt.startswith("You are Zaphod.")
    assert "Reply in haiku." in after.system_prompt[after.system_prompt.index("# Instructions") :]
    # An existing session keeps its frozen prompt.
    assert (await runtime.sessions.session(before.id)).system_prompt.startswith("You are Marvin.")
