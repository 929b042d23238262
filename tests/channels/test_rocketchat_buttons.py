"""Rocket.Chat approvals by button and sends posted once, through a whole runtime on the
fake server (tests/channels/fake_rocketchat.py): a prompt's buttons come in a message of
their own whose press posts the person's message with the prompt's nonce; they are
deleted once answered; a press of an old prompt's button (kept where the bot may not
delete) is told it expired and answers nothing, while the typed word still works, as it
does where the server refuses the buttons; a reply stored by the server whose answer was
lost is retried as the same message id and shows once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from habakkuk.channels.rocketchat_wire import ID_ALPHABET, ID_LENGTH, derived_id, pressed
from habakkuk.runtime import Runtime
from tests.channels.fake_rocketchat import BOT_ID, FakeRocketChat, RocketDriver
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

APPROVE, DENY = "✅ Approve", "❌ Deny"
TWO_APPROVALS = """
- match: "again"
  steps:
    - text: "Once more."
      tool_calls:
        - name: exec
          arguments: {command: "echo second-run"}
    - "second done"
- steps:
    - text: "Let me run it."
      tool_calls:
        - name: exec
          arguments: {command: "echo first-run"}
    - "first done"
"""
ECHO = "- 'echo: {input}'"


@pytest.fixture
async def fake() -> AsyncIterator[FakeRocketChat]:
    async with FakeRocketChat(ping=0.5) as server:
        yield server


async def start(
    fake: FakeRocketChat,
    runtime_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    mode: str,
) -> Runtime:
    """A runtime with one Rocket.Chat account `rc` on the fake, connected."""
    driver = RocketDriver(fake)
    for variable, value in driver.env().items():
        monkeypatch.setenv(variable, value)
    entry = "".join(f"    {line}\n" for line in driver.channel_yaml("rc").splitlines())
    runtime: Runtime = await runtime_factory(
        mock_config(script, mode=mode, extra=f"channels:\n  rc:\n{entry}")
    )
    runtime.start_workers()
    assert runtime.channels is not None
    await runtime.channels.started()
    up = await runtime.channels.supervisor.wait_adapter("rc", timeout=PROCESS_BOUND)
    assert up is not None
    return runtime


def bot_texts(fake: FakeRocketChat) -> list[str]:
    return RocketDriver(fake).texts()


def with_buttons(fake: FakeRocketChat) -> list[Any]:
    return [m for m in fake.of() if m.user_id == BOT_ID and m.actions]


async def said(fake: FakeRocketChat, text: str) -> None:
    await eventually(
        lambda: any(text in t for t in bot_texts(fake)),
        what=f"the bot to say {text!r} (said {bot_texts(fake)})",
    )


async def tool_results(runtime: Runtime) -> list[str]:
    found = []
    for session in await runtime.sessions.list_sessions():
        for stored in await runtime.sessions.messages(session.id):
            found += [result.text for result in stored.message.tool_results]
    return found


def test_a_message_id_is_seventeen_characters_of_rocket_chats_alphabet_and_stable() -> None:
    made = derived_id("reply:turn:rc:room:m1\x000")
    assert len(made) == ID_LENGTH and set(made) <= set(ID_ALPHABET)
    assert made == derived_id("reply:turn:rc:room:m1\x000")
    assert made != derived_id("reply:turn:rc:room:m1\x001")


def test_a_press_is_the_data_in_brackets_at_the_end_and_nothing_else_is() -> None:
    assert pressed("✅ Approve [fy|a1b2c3d4|0]") == "fy|a1b2c3d4|0"
    assert pressed("yes") is None
    assert pressed("see [fy|a1b2c3d4|0] later") is None
    assert pressed("[fy|a1b2|x]") is None


async def test_a_pressed_button_answers_and_its_buttons_are_deleted(
    fake: FakeRocketChat, runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = await start(fake, runtime_factory, monkeypatch, TWO_APPROVALS, "workspace")
    await fake.say("run the thing")
    await said(fake, "Approval needed")
    await eventually(lambda: with_buttons(fake), what="the buttons (after the prompt)")
    [buttons] = with_buttons(fake)
    prompt = next(m for m in fake.of() if "Approval needed" in m.msg)
    assert buttons.msg == "" and fake.of().index(buttons) == fake.of().index(prompt) + 1
    actions = [a for row in buttons.actions for a in row["actions"]]
    assert [a["text"] for a in actions] == [APPROVE, DENY, "Allow for this session"]
    assert all(a["msg_in_chat_window"] and a["type"] == "button" for a in actions)
    press = await fake.press(APPROVE)
    assert press.user_id != BOT_ID and press.msg.startswith(f"{APPROVE} [fy|")
    await said(fake, "first done")
    await said(fake, "Approved")  # where the press was made
    assert "first-run" in (await tool_results(runtime))[0]
    await eventually(lambda: not with_buttons(fake), what="the buttons to be deleted")
    rows = await runtime.queue.db.fetchall("SELECT status FROM jobs WHERE kind = 'turn'")
    assert [row["status"] for row in rows] == ["done"]  # the press started no turn


async def test_an_old_prompts_button_is_told_it_expired_and_a_typed_word_still_answers(
    fake: FakeRocketChat, runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.refuse_deletes = True  # the bot may not delete: the buttons stay
    runtime = await start(fake, runtime_factory, monkeypatch, TWO_APPROVALS, "workspace")
    await fake.say("run the thing")
    await said(fake, "Approval needed")
    first = await fake.press(APPROVE)
    await said(fake, "first done")
    await fake.say("and again")
    await eventually(lambda: len(with_buttons(fake)) == 2, what="the second prompt's buttons")
    await fake.say(first.msg)  # the first prompt's Approve, pressed again
    await said(fake, "This prompt has expired.")
    assert not any("second done" in text for text in bot_texts(fake))
    await fake.say("no")
    await said(fake, "second done")
    results = await tool_results(runtime)
    assert "first-run" in results[0] and results[1].startswith("denied")


async def test_where_the_server_refuses_the_buttons_the_prompt_goes_and_a_typed_yes_answers(
    fake: FakeRocketChat, runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.refuse_buttons = True
    runtime = await start(fake, runtime_factory, monkeypatch, TWO_APPROVALS, "workspace")
    await fake.say("run the thing")
    await said(fake, "Approval needed")
    await fake.say("yes")
    await said(fake, "first done")
    assert not with_buttons(fake)
    assert "first-run" in (await tool_results(runtime))[0]
    rows = await runtime.queue.db.fetchall("SELECT id, status FROM jobs WHERE id LIKE 'prompt:%'")
    assert [row["status"] for row in rows] == ["done"]  # the prompt's delivery did not fail


async def test_a_reply_whose_answer_was_lost_is_retried_as_the_same_message_and_shows_once(
    fake: FakeRocketChat, runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = await start(fake, runtime_factory, monkeypatch, ECHO, "full")
    fake.lose_answers(1)  # stored, but the bot hears a 504
    asked = await fake.say("hello")
    reply = f"reply:turn:rc:{asked.rid}:{asked.id}"

    async def delivered() -> bool:
        row = await runtime.queue.db.fetchone(
            "SELECT status, attempts FROM jobs WHERE id = ?", (reply,)
        )
        return row is not None and row["status"] == "done"

    await eventually(delivered, what="the reply's delivery")
    row = await runtime.queue.db.fetchone("SELECT attempts FROM jobs WHERE id = ?", (reply,))
    assert row is not None and row["attempts"] == 2  # the retry found it there
    assert bot_texts(fake) == ["echo: hello"]
    assert fake.sends == 2
