"""A plugin's chat commands go through `dispatch` after the built-ins; `habakkuk plugins
enable` shows what it runs before anything is enabled."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from habakkuk.cli import main
from habakkuk.conversation.commands import Reply, dispatch, find
from habakkuk.conversation.plugin_commands import shadowed_commands
from habakkuk.engine.config import Config, load_config
from habakkuk.engine.home import Home
from habakkuk.knowledge.hub.lock import read_lock
from tests.knowledge.plugins.conftest import MANIFEST, Install


@dataclass
class Services:
    config: Config


@dataclass
class Chat:
    """A chat surface as dispatch sees it: it records the turns commands queue."""

    services: Services
    surface: str = "chat"
    turns: list[str] = field(default_factory=list)

    async def start_turn(self, text: str) -> str | None:
        self.turns.append(text)
        return "turn-1"


async def run(chat: Chat, text: str) -> Reply:
    reply = await dispatch(text, chat)  # type: ignore[arg-type]  # a plugin command's part only
    assert reply is not None
    return reply


async def test_a_prompt_command_queues_its_prompt_with_the_args(
    home: Home, install: Install
) -> None:
    install(enabled=True)
    chat = Chat(Services(load_config(home)))
    reply = await run(chat, "/standup mention the release")
    assert (reply.text, reply.error) == ("", False)
    assert chat.turns == ["Write my stand-up for today.\n\nmention the release"]


async def test_a_script_command_runs_in_the_plugin_folder_and_replies_with_its_output(
    home: Home, install: Install
) -> None:
    folder = install(enabled=True)
    chat = Chat(Services(load_config(home)))
    reply = await run(chat, "/where one two")
    assert not reply.error
    assert reply.text == f"{folder}\nargs=one two\none two"  # cwd, HABAKKUK_ARGS, stdin
    assert chat.turns == []


async def test_a_failing_script_is_an_error_reply_with_stderrs_last_line(
    home: Home, install: Install
) -> None:
    manifest = MANIFEST.replace(
        "script: 'pwd; echo \"args=$HABAKKUK_ARGS\"; cat'",
        "script: 'echo partial; echo first >&2; echo the real reason >&2; exit 3'",
    )
    install(manifest=manifest, enabled=True)
    reply = await run(Chat(Services(load_config(home))), "/where")
    assert reply.error
    assert reply.text == "/where: the real reason"


async def test_a_script_past_its_timeout_is_killed_and_says_so(
    home: Home, install: Install
) -> None:
    manifest = MANIFEST.replace(
        "script: 'pwd; echo \"args=$HABAKKUK_ARGS\"; cat'", "script: 'sleep 60'\n    timeout: 0.2"
    )
    install(manifest=manifest, enabled=True)
    reply = await run(Chat(Services(load_config(home))), "/where")
    assert reply.error
    assert "timed out after 0.2s" in reply.text


async def test_a_built_in_command_is_never_overridden(home: Home, install: Install) -> None:
    manifest = MANIFEST.replace("  standup:", "  help:")
    install(manifest=manifest, enabled=True)
    config = load_config(home)
    chat = Chat(Services(config))
    reply = await run(chat, "/help")
    assert reply.text.startswith("**Commands**")
    assert chat.turns == []
    assert "/where [ARGS] — where the script runs and what it got (plugin tools)" in reply.text
    assert "(plugin tools)" not in reply.text.split("/where")[0]  # /help is not listed twice
    assert shadowed_commands(config, find) == [
        "plugin tools: command /help is a built-in command; the plugin's is ignored"
    ]


async def test_a_disabled_plugins_command_is_unknown(home: Home, install: Install) -> None:
    install()
    reply = await run(Chat(Services(load_config(home))), "/where")
    assert reply.error
    assert reply.text.startswith("Unknown command /where.")


def test_enable_shows_what_the_plugin_runs_then_enables_it(
    home: Home, install: Install, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = install()
    assert main(["plugins", "enable", "tools", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "MCP server tools (toolset mcp:tools): runs `" in out
    assert "zoo.py stdio basic` in the plugin folder" in out
    assert "hook on tool_before: runs `pwd; exit 1`" in out
    assert "command /where: runs `pwd;" in out
    assert "command /standup: sends the prompt 'Write my stand-up for today.'" in out
    assert str(folder) in out
    entries, _ = read_lock(home.root / "plugins")
    assert entries["tools"].enabled and entries["tools"].approved


def test_enable_without_a_terminal_or_yes_enables_nothing(
    home: Home, install: Install, capsys: pytest.CaptureFixture[str]
) -> None:
    install()
    assert main(["plugins", "enable", "tools"]) != 0
    assert "repeat with --yes" in capsys.readouterr().err
    assert not read_lock(home.root / "plugins")[0]["tools"].enabled


def test_a_dangerous_plugin_needs_yes(
    home: Home,
    install: Install,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install(verdict="dangerous")
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    assert main(["plugins", "enable", "tools"]) != 0
    assert "found it dangerous" in capsys.readouterr().err
    assert not read_lock(home.root / "plugins")[0]["tools"].enabled


def test_remove_keeps_a_backup_and_list_shows_the_rest(
    home: Home, install: Install, capsys: pytest.CaptureFixture[str]
) -> None:
    install()
    install("other", MANIFEST.replace("name: tools", "name: other"), enabled=True)
    assert main(["plugins", "remove", "tools"]) == 0
    assert not (home.root / "plugins" / "tools").exists()
    kept = list((home.root / "plugins" / ".backups" / "tools").iterdir())
    assert len(kept) == 1 and (kept[0] / "files" / "habakkuk-plugin.yaml").is_file()
    capsys.readouterr()
    assert main(["plugins", "list"]) == 0
    out = capsys.readouterr().out
    assert "tools" not in out.replace("Test tools", "")
    assert out.startswith("other") and "enabled" in out
    assert main(["plugins", "show", "tools"]) != 0
