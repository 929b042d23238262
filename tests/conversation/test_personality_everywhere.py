"""/personality gives the same answers in the terminal, in Telegram, in the web chat and
through `habakkuk run --session`, and what it sets reaches the session's turns."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.test_telegram_e2e import channel_yaml
from tests.conftest import WriteConfig, mock_config
from tests.conversation.test_commands_everywhere import (
    SCRIPT,
    normalized,
    telegram_answers,
    terminal_answers,
    web_answers,
)
from tests.server.conftest import ServeFactory

CHOICES = "concise, warm, formal, technical, playful"
CONVERSATION = [
    "/personality",
    "/personality playful",
    "/personality",
    "/personality ../config",
    "/personality nosuch",
    "/personality default",
    "/personality warm",
    "/new",
    "/personality",
]


async def test_personality_gives_the_same_answer_on_every_surface(
    serve: ServeFactory, tg: FakeTelegram, tmp_path: Path
) -> None:
    served = await serve(mock_config(SCRIPT, extra=textwrap.dedent(channel_yaml(tg))))
    assert served.runtime.channels is not None
    await served.runtime.channels.started()
    by_surface = {
        "terminal": await terminal_answers(tmp_path, CONVERSATION),
        "telegram": await telegram_answers(tg, CONVERSATION),
        "web": await web_answers(served, CONVERSATION),
    }

    differ = []
    for index, command in enumerate(CONVERSATION):
        seen = {name: normalized(answers[index]) for name, answers in by_surface.items()}
        if len(set(seen.values())) != 1:
            differ.append(f"{command}: {seen}")
    assert not differ, "\n".join(differ)
    web = by_surface["web"]
    assert web[0].startswith(f"Personality: none (the agent's own voice). Choices: {CHOICES}.")
    assert web[1] == "Personality: playful for this session"
    assert web[2].startswith(f"Personality: playful for this session. Choices: {CHOICES}.")
    unknown = f"(choices: {CHOICES}, default)"
    assert web[3] == f"/personality: unknown persona '../config' {unknown}"
    assert web[4] == f"/personality: unknown persona 'nosuch' {unknown}"
    assert web[5] == "Personality: none; the agent's own voice again"
    assert web[6] == "Personality: warm for this session"
    assert web[8].startswith("Personality: none")  # /new starts without it


def test_run_sets_the_personality_of_a_session(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(mock_config(SCRIPT))
    (home.root / "personalities").mkdir()
    (home.root / "personalities" / "terse.md").write_text("Answer in one line.", encoding="utf-8")
    assert main(["run", "--json", "hello"]) == 0
    session = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["session"]

    assert main(["run", "--session", session, "/personality terse"]) == 0
    assert capsys.readouterr().out.strip() == "Personality: terse for this session"
    assert main(["run", "--session", session, "/personality"]) == 0
    assert f"Choices: {CHOICES}, terse." in capsys.readouterr().out
    assert main(["run", "--session", session, "/personality ../terse"]) == 2
    assert "unknown persona '../terse'" in capsys.readouterr().err
