"""/remember and /forget give the same answers in the terminal, Telegram and the web chat,
and act on the conversation's own agent only."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from habakkuk.knowledge.memory_views import parse_tags, title_from_text
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.test_telegram_e2e import channel_yaml
from tests.conftest import mock_config
from tests.conversation.test_commands_everywhere import (
    SCRIPT,
    normalized,
    telegram_answers,
    terminal_answers,
    web_answers,
)
from tests.server.conftest import ServeFactory

SECRET = "AKIAIOSFODNN7EXAMPLE"
COMMANDS = [
    "/remember",
    "/remember Flat white with oat milk, no sugar",
    "/remember Flat white with oat milk, no sugar",  # never replaces: a second note
    "/remember Sister's birthday is on the third of March",
    "/forget oat milk",  # two notes match: listed with their slugs
    "/forget birthday",  # the single match is forgotten
    "/forget birthday",
    "/forget",
    f"/remember the deploy key is {SECRET}",
    "/help",
]
# The web chat's conversation goes to agent ops; Telegram's (same home) to main.
WEB_TO_OPS = """  ops:
    model: mock/scripted
    mode: full
{channels}  web:
    type: web
    routes:
      - chat: ops-room
        agent: ops
"""


async def test_remember_and_forget_answer_alike_everywhere_and_stay_in_their_agent(
    serve: ServeFactory, tg: FakeTelegram, tmp_path: Path
) -> None:
    channels = textwrap.dedent(channel_yaml(tg)).lstrip("\n")
    served = await serve(mock_config(SCRIPT, extra=WEB_TO_OPS.format(channels=channels)))
    assert served.runtime.channels is not None
    await served.runtime.channels.started()
    by_surface = {
        "terminal": await terminal_answers(tmp_path, COMMANDS),
        "telegram": await telegram_answers(tg, COMMANDS),
        "web": await web_answers(served, COMMANDS, conversation="ops-room"),
    }
    differ = []
    for index, command in enumerate(COMMANDS):
        seen = {name: normalized(answers[index]) for name, answers in by_surface.items()}
        if len(set(seen.values())) != 1:
            differ.append(f"{command}: {seen}")
    assert not differ, "\n".join(differ)

    said = by_surface["web"]  # the web chat shows answers as plain text
    assert said[0].startswith("/remember TEXT")
    first = re.search(r"\(([^()]+)\)\.$", said[1])
    second = re.search(r"\(([^()]+)\)\.$", said[2])
    assert first and second and first.group(1) != second.group(1)
    assert said[1].startswith("Remembered as Flat white with oat milk, no sugar (")
    listed = said[4].splitlines()
    assert listed[0].startswith("2 notes match 'oat milk'; repeat with a slug")
    assert sorted(line.split(". ", 1)[1] for line in listed[1:]) == sorted(
        f"Flat white with oat milk, no sugar — {found.group(1)}" for found in (first, second)
    )
    assert [line.split(".", 1)[0] for line in listed[1:]] == ["1", "2"]
    assert said[5].startswith("Forgot Sister's birthday is on the third of March (")
    assert said[6] == "No note matches 'birthday'."
    assert said[7].startswith("/forget QUERY")
    assert said[8].startswith("/remember: ") and SECRET not in said[8]
    assert "/remember TEXT" in said[9] and "/forget QUERY" in said[9]

    memory = served.runtime.memory
    for agent in ("ops", "main"):  # web -> ops, Telegram -> main: each kept its own two
        notes, total = await memory.list_notes(agent)
        assert total == 2, agent
        for note in notes:
            assert note.tags == ("remembered",) and note.source == "user"
            assert note.title == "Flat white with oat milk, no sugar"
    files = [p for p in served.runtime.home.root.rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix == ".md" and SECRET in p.read_text("utf-8")]


def test_a_remembered_note_is_titled_by_its_first_words() -> None:
    assert title_from_text("Flat white with oat milk, no sugar") == (
        "Flat white with oat milk, no sugar"
    )
    assert title_from_text("one two three four five six seven eight nine ten") == (
        "one two three four five six seven eight"
    )
    assert title_from_text("  spaced\n\tout   words.  ") == "spaced out words"
    long_word = "x" * 100
    assert title_from_text(long_word) == "x" * 60
    assert len(title_from_text("word " * 5 + "y" * 50)) <= 60


def test_tags_are_parsed_once_for_every_surface() -> None:
    assert parse_tags("a, b,,c ,a") == ("a", "b", "c")
    assert parse_tags(["x", " y ", "", "x"]) == ("x", "y")
    assert parse_tags("") == ()
