"""Every chat command gives the same answer in the terminal, in Telegram and in the web chat.

The same conversation is held on three real surfaces: the terminal app (Pilot),
a Telegram chat (the fake Bot API) and the web chat (POST /api/chat). Answers
are compared after their formatting is dropped (Telegram's HTML, Markdown
emphasis), with session ids and numbers folded, and without the lines that
describe the surface itself (who you are, the channel, the whole queue).
"""

from __future__ import annotations

import asyncio
import html
import re
import textwrap
from pathlib import Path

from habakkuk.conversation.commands import plain
from habakkuk.engine.home import Home
from habakkuk.widgets.notice import Notice
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.test_telegram_e2e import channel_yaml
from tests.conftest import mock_config
from tests.helpers import eventually
from tests.server.conftest import Served, ServeFactory
from tests.tui.conftest import make_app, ready, running

SCRIPT = "- 'echo: {input}'"
# In order: each command sees the state the ones before it left.
CONVERSATION = [
    "/help",
    "/status",
    "/whoami",
    "/agents",
    "/title Groceries",
    "/title",
    "/think",
    "/think turbo",
    "/think high",
    "/think",
    "/think default",
    "/model",
    "/model nowhere/model-x",
    "/usage",
    "/undo",
    "/compact",
    "/stop",
    "/frobnicate",
    "/rewind x",
    "/rewind 5",
    "/fork",
    "/rewind",
    "/title",
    "/new",
    "/title",
    "/agent nobody",
    "/agent default",
    "/goal",
    "/goal --turns 0 tidy up",
    "/goal clear",
]
SURFACE_LINES = ("You ", "Allowed by ", "Channel ", "Queue ")


def normalized(text: str) -> str:
    """The answer without formatting, ids, numbers and the lines about the surface."""
    text = plain(html.unescape(re.sub(r"</?[a-z]+[^>]*>", "", text)))
    text = re.sub(r"ses_[0-9a-zA-Z]+", "SES", text)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    lines = [
        line.rstrip()
        for line in text.splitlines()
        if line.strip() and not line.startswith(SURFACE_LINES) and not line.startswith("Keys:")
    ]
    return "\n".join(lines)


async def terminal_answers(
    tmp_path: Path, commands: list[str] = CONVERSATION, config: str = ""
) -> list[str]:
    home = Home(tmp_path / "terminal")
    home.prepare()
    home.config_path.write_text(config or mock_config(SCRIPT), encoding="utf-8")
    app = make_app(home)
    answers = []
    async with running(app, size=(100, 40)) as ui:
        await ui.send("hello")
        await ui.turn_finished()
        for command in commands:
            # A note the screen did not show before (/fork reloads the view, so no count).
            before = set(app.screen.query(Notice))
            await ui.send(command)

            def answered(before: set[Notice] = before) -> list[Notice]:
                return [n for n in app.screen.query(Notice) if n not in before]

            await eventually(answered, what=f"the answer to {command}")
            answers.append(answered()[-1].text)
    return answers


async def telegram_answers(tg: FakeTelegram, commands: list[str] = CONVERSATION) -> list[str]:
    tg.message("hello")
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    answers = []
    for command in commands:
        count = len(tg.texts())
        tg.message(command)

        def answered(count: int = count) -> bool:
            return len(tg.texts()) > count

        await tg.wait_for(answered)
        answers.append(tg.texts()[-1])
    return answers


async def web_answers(
    served: Served, commands: list[str] = CONVERSATION, conversation: str = "web-1"
) -> list[str]:
    first = await served.post_json("/api/chat", {"conversation": conversation, "text": "hello"})
    await served.runtime.turns.wait_turn(first["turn"])
    store = served.server.web_store()
    answers = []
    for command in commands:
        sent = await served.post_json("/api/chat", {"conversation": conversation, "text": command})
        if sent["message"] or not sent["turn"]:
            answers.append(sent["message"])
            continue
        # Queued (a /compact): its outcome is appended to the conversation when it ends.
        await served.runtime.turns.wait_turn(sent["turn"])
        for _ in range(500):
            found = await store.find(f"reply:{sent['turn']}")
            if found is not None:
                break
            await asyncio.sleep(0.02)
        assert found is not None, f"no reply appended for {command}"
        answers.append(found.text)
    return answers


async def test_every_command_gives_the_same_answer_on_every_surface(
    serve: ServeFactory,
    tg: FakeTelegram,
    tmp_path: Path,
) -> None:
    served = await serve(mock_config(SCRIPT, extra=textwrap.dedent(channel_yaml(tg))))
    assert served.runtime.channels is not None
    await served.runtime.channels.started()
    by_surface = {
        "terminal": await terminal_answers(tmp_path),
        "telegram": await telegram_answers(tg),
        "web": await web_answers(served),
    }
    differ = []
    for index, command in enumerate(CONVERSATION):
        seen = {name: normalized(answers[index]) for name, answers in by_surface.items()}
        if len(set(seen.values())) != 1:
            differ.append(f"{command}: {seen}")
    assert not differ, "\n".join(differ)
    answers = dict(zip(CONVERSATION, by_surface["web"], strict=False))
    assert "/usage" in answers["/help"] and "/rewind [N]" in answers["/help"]
    assert answers["/title Groceries"] == "Title set: Groceries"
    assert "Usage" in answers["/usage"]
    assert answers["/stop"] == "Nothing is running."
    assert answers["/frobnicate"].startswith("Unknown command /frobnicate")
    assert answers["/goal"] == "No goal is set here. /goal [--turns N] TEXT sets one."
    assert answers["/goal --turns 0 tidy up"].startswith("/goal: --turns 0: give a whole number")
    assert answers["/goal clear"] == "No goal is running here."


async def test_usage_counts_the_sessions_calls_and_rewind_drops_the_last_messages(
    serve: ServeFactory,
) -> None:
    served = await serve(mock_config(SCRIPT))
    for text in ("one", "two", "three"):
        sent = await served.post_json("/api/chat", {"conversation": "u", "text": text})
        await served.runtime.turns.wait_turn(sent["turn"])
    usage = await served.post_json("/api/chat", {"conversation": "u", "text": "/usage"})
    assert (
        "mock/scripted: 3 call(s)" in usage["message"] or "scripted: 3 call(s)" in usage["message"]
    )
    # The mock model has no price: its calls are counted apart from the cost.
    assert (
        "3 calls went to models with no known price; they are not in the cost" in (usage["message"])
    )
    rewound = await served.post_json("/api/chat", {"conversation": "u", "text": "/rewind 2"})
    assert rewound["message"].startswith(f"Rewound {usage['session']} without your last 2")
    assert rewound["session"] != usage["session"]
    kept = [m.message.role for m in await served.runtime.sessions.messages(rewound["session"])]
    assert kept == ["user", "assistant"]  # "one" and its reply
    assert (
        len(await served.runtime.sessions.messages(usage["session"])) == 6
    )  # the original is kept
    again = await served.post_json("/api/chat", {"conversation": "u", "text": "next"})
    assert again["session"] == rewound["session"]


async def test_the_palette_finds_every_chat_action_by_a_word(tmp_path: Path) -> None:
    from textual.command import CommandList, CommandPalette

    home = Home(tmp_path / "palette")
    home.prepare()
    home.config_path.write_text(mock_config(SCRIPT), encoding="utf-8")
    app = make_app(home)
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in (
            "Chat: new session",
            "Session: compact",
            "Session: export",
            "Session: fork",
            "Session: rewind",
            "Session: usage",
            "Go: sessions",
        ):
            assert title in titles  # fmt: skip
        await pilot.press("ctrl+p")
        await eventually(lambda: isinstance(app.screen, CommandPalette), what="the palette")
        await pilot.press(*"new")
        found = app.screen.query_one(CommandList)

        def matches() -> list[str]:
            return [str(option.prompt) for option in found.options]

        await eventually(lambda: any("Chat: new session" in m for m in matches()), what="it")
