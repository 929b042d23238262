"""The CLI as a user runs it: exact spellings, output shapes and exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig

SCRIPTED = """
providers:
  mock:
    type: mock
    script:
      - match: "fail"
        steps: [{error: bad_request}]
      - steps: ["Hello from the script."]
agents:
  main:
    model: mock/x
  second:
    model: mock/y
"""


@pytest.fixture
def scripted_home(home: Home, write_config: WriteConfig) -> Home:
    write_config(SCRIPTED)
    return home


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["run", "--json", *args])
    out = capsys.readouterr().out.strip().splitlines()
    body: dict[str, Any] = json.loads(out[-1])
    return code, body


def test_run_json_prints_one_object_and_exits_0(
    scripted_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    code, body = run_json(capsys, "hi there")
    assert code == 0
    assert set(body) == {"session", "turn", "status", "reply"}
    assert body["status"] == "done" and body["reply"] == "Hello from the script."
    assert body["session"].startswith("ses_") and body["turn"].startswith("turn_")


def test_run_streams_the_reply_to_stdout(
    scripted_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "hi"]) == 0
    assert "Hello from the script." in capsys.readouterr().out


def test_run_failed_turn_exits_1_with_error(
    scripted_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    code, body = run_json(capsys, "please fail")
    assert code == 1
    assert body["status"] == "failed" and "bad_request" in body["error"]


def test_run_continues_a_session(scripted_home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    _, first = run_json(capsys, "one")
    code, second = run_json(capsys, "--session", first["session"], "two")
    assert code == 0 and second["session"] == first["session"]
    assert main(["sessions", "export", first["session"], "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "user", "assistant"]


def test_run_picks_the_agent(scripted_home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    _, body = run_json(capsys, "--agent", "second", "hi")
    assert main(["sessions", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed[0]["id"] == body["session"] and listed[0]["agent"] == "second"


@pytest.mark.parametrize(
    "argv",
    [["run", "--agent", "ghost", "hi"], ["run", "--session", "ses_missing", "hi"]],
)
def test_run_bad_usage_exits_2_with_one_line(
    scripted_home: Home, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("habakkuk: ")


def test_sessions_list_json_is_newest_first(
    scripted_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    _, a = run_json(capsys, "first")
    _, b = run_json(capsys, "second")
    assert main(["sessions", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [s["id"] for s in listed] == [b["session"], a["session"]]
    assert set(listed[0]) == {"id", "agent", "title", "created_at", "updated_at"}
    assert listed[0]["title"] == "second"
    assert main(["sessions", "list", "--agent", "second", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_sessions_list_leaves_out_board_and_sub_agent_sessions_unless_all(
    scripted_home: Home,
) -> None:
    import asyncio

    from habakkuk.engine.sessions import BOARD_ORIGIN, DELEGATE_ORIGIN
    from habakkuk.runtime import Runtime

    async def seed() -> None:
        runtime = await Runtime.open(scripted_home)
        try:
            await runtime.sessions.new_session(None, origin="cli", session_id="ses_chat")
            # As a card's run and a delegated task record theirs.
            await runtime.sessions.new_session(None, origin=BOARD_ORIGIN, session_id="ses_card")
            await runtime.sessions.new_session(None, origin=DELEGATE_ORIGIN, session_id="ses_child")
        finally:
            await runtime.close()

    asyncio.run(seed())

    def listed(*flags: str) -> list[str]:
        result = subprocess.run(
            [sys.executable, "-m", "habakkuk.cli", "sessions", "list", "--json", *flags],
            capture_output=True,
            text=True,
            env={**os.environ, "HABAKKUK_HOME": str(scripted_home.root)},
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        return sorted(s["id"] for s in json.loads(result.stdout))

    assert listed() == ["ses_chat"]
    assert listed("--all") == ["ses_card", "ses_chat", "ses_child"]


def test_sessions_export_writes_each_format_to_a_file(
    scripted_home: Home, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, body = run_json(capsys, "export me")
    for fmt, needle in [("md", "# export me"), ("html", "<!doctype html>"), ("json", '"blocks"')]:
        target = tmp_path / f"out.{fmt}"
        assert (
            main(["sessions", "export", body["session"], "--format", fmt, "-o", str(target)]) == 0
        )
        assert needle in target.read_text()


def test_sessions_search_finds_words(
    scripted_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    run_json(capsys, "remember the zeppelin")
    assert main(["sessions", "search", "zeppelin"]) == 0
    assert "[zeppelin]" in capsys.readouterr().out


def test_init_writes_a_working_demo_config_and_refuses_to_overwrite(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init"]) == 0
    assert (home.config_path.stat().st_mode & 0o777) == 0o600
    assert main(["init"]) == 2
    code, body = run_json(capsys, "hello demo")
    assert code == 0 and "You said: hello demo" in body["reply"]


def test_doctor_reports_one_line_per_check(
    scripted_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("ok    config:")
    assert any(line.startswith("ok    database control.db") for line in lines)


def test_doctor_fails_on_a_missing_key(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(
        "providers:\n  a: {type: anthropic, key_env: NOPE_KEY}\n"
        "agents:\n  main: {model: a/claude}\n"
    )
    assert main(["doctor"]) == 1
    assert "FAIL  key a: NOPE_KEY is not set" in capsys.readouterr().out


def test_smoke_prints_smoke_ok(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--smoke"]) == 0
    assert capsys.readouterr().out.strip() == "smoke: ok"


def test_help_does_not_import_heavy_libraries(tmp_path: Path) -> None:
    code = (
        "import sys; from habakkuk.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('anthropic', 'openai', 'litellm', 'textual', 'aiohttp', 'mcp',"
        " 'botocore')"
        " if m in sys.modules]\nprint('HEAVY', heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "HABAKKUK_HOME": str(tmp_path)},
        timeout=60,
    )
    assert "HEAVY []" in result.stdout


def test_doctor_reports_mcp_servers_that_cannot_start(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(
        "providers:\n  m: {type: mock}\nagents:\n  main: {model: m/x}\n"
        "mcp_servers:\n  files:\n    command: no-such-mcp-program-xyz\n"
    )
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  mcp files: program 'no-such-mcp-program-xyz' is not on PATH" in out


def test_building_the_parser_does_not_import_asyncio(tmp_path: Path) -> None:
    """`habakkuk --help` only builds the parser: keep that path to the standard basics."""
    code = (
        "import sys; from habakkuk.cli import build_parser; build_parser()\n"
        "print('ASYNCIO', 'asyncio' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "HABAKKUK_HOME": str(tmp_path)},
        timeout=60,
    )
    assert "ASYNCIO False" in result.stdout


def test_top_level_help_declares_no_commands_actions(tmp_path: Path) -> None:
    """`habakkuk --help` lists the commands; their actions' modules load only when one of
    them runs, so adding commands does not slow the help down."""
    code = (
        "import sys\nfrom habakkuk.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith('habakkuk.cli.')"
        " and m != 'habakkuk.cli.entry' or m == 'habakkuk.protocols.mcp.cli'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "HABAKKUK_HOME": str(tmp_path)},
        timeout=60,
    )
    assert "LOADED []" in result.stdout, result.stdout + result.stderr
    assert "schedules" in result.stdout and "skills" in result.stdout


def test_run_runs_a_chat_command_against_the_session(
    scripted_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    _, first = run_json(capsys, "one")
    assert main(["run", "--session", first["session"], "/title Trip"]) == 0
    assert capsys.readouterr().out.strip() == "Title set: Trip"
    assert main(["run", "--session", first["session"], "/usage"]) == 0
    assert "1 call(s)" in capsys.readouterr().out
    code = main(["run", "--json", "--session", first["session"], "/rewind"])
    body = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and body["error"] is False
    assert body["reply"].startswith(f"Rewound {first['session']}")
    assert body["session"] != first["session"]  # the fork, to continue with --session
    assert main(["run", "/frobnicate"]) == 2
    assert "Unknown command /frobnicate" in capsys.readouterr().err
    assert main(["run", "/retry"]) == 2  # interactive only: not a command of `run`


SERVERS = Path(__file__).parents[1] / "mcp" / "mcp_servers.py"
REACHES_MAIN = "its tools reach agent main (toolset mcp:good)"


def test_doctor_fails_what_a_later_start_would_fail(
    home: Home,
    write_config: WriteConfig,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)  # not installed, whatever this venv has
    monkeypatch.delenv("NO_SUCH_BOT_TOKEN", raising=False)
    # A machine without ripgrep, whatever this one has: PATH holds git only.
    tools = tmp_path / "bin"
    tools.mkdir()
    git = shutil.which("git")
    if git is not None:
        (tools / "git").symlink_to(git)
    monkeypatch.setenv("PATH", str(tools))
    not_executable = tmp_path / "server.sh"
    not_executable.write_text("#!/bin/sh\n")
    write_config(
        f"""
        providers:
          m: {{type: mock}}
          gw: {{type: litellm, key_env: HOME}}
        agents:
          main: {{model: m/x}}
        channels:
          tg: {{type: telegram, token_env: NO_SUCH_BOT_TOKEN, agent: main}}
        mcp_servers:
          good: {{command: {sys.executable}, args: [{SERVERS}, stdio, basic]}}
          crash: {{command: {sys.executable}, args: [{SERVERS}, stdio, crash]}}
          gone: {{command: /nonexistent/mcp-server}}
          plain: {{command: {not_executable}}}
        """
    )
    assert main(["doctor"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("(2 providers, 1 agent)")
    assert (
        "FAIL  provider gw: type litellm needs the litellm extra, which is not installed; "
        "run: pip install 'habakkuk[litellm]'" in lines
    )
    assert "FAIL  channel tg: NO_SUCH_BOT_TOKEN is not set (environment or .env)" in lines
    assert f"ok    mcp good: answered initialize; {REACHES_MAIN}" in lines
    crash = next(line for line in lines if line.startswith("FAIL  mcp crash: does not start: "))
    assert "boom: missing configuration" in crash
    assert "FAIL  mcp gone: program '/nonexistent/mcp-server' does not exist" in lines
    assert f"FAIL  mcp plain: program '{not_executable}' is not an executable file" in lines
    # rg missing is a warning (search_files falls back to its own walker), not a failure.
    assert "WARN  rg: not on PATH (fast search_files)" in lines
    assert not any("not on PATH" in line for line in lines if not line.startswith("WARN  rg:"))


def test_doctor_says_ok_for_a_set_channel_token_and_one_provider(
    home: Home,
    write_config: WriteConfig,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("A_BOT_TOKEN", "123:abc")
    write_config(
        "providers:\n  m: {type: mock}\nagents:\n  main: {model: m/x}\n"
        "channels:\n  tg: {type: telegram, token_env: A_BOT_TOKEN, agent: main}\n"
    )
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "(1 provider, 1 agent)" in out and "ok    channel tg: A_BOT_TOKEN set" in out


def test_doctor_checks_every_secret_variable_a_channel_names(
    home: Home,
    write_config: WriteConfig,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1")
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    write_config(
        "providers:\n  m: {type: mock}\nagents:\n  main: {model: m/x}\nchannels:\n"
        "  work: {type: slack, app_token_env: SLACK_APP_TOKEN, bot_token_env: SLACK_BOT_TOKEN}\n"
        "  sig: {type: signal, base_url: 'http://127.0.0.1:8080', account: '+4915100000'}\n"
    )
    assert main(["doctor"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "FAIL  channel work: SLACK_BOT_TOKEN is not set (environment or .env)" in lines
    assert "ok    channel sig: no secret to set" in lines


@pytest.mark.parametrize("where", ["home", "parent"])
def test_doctor_warns_when_a_workspace_contains_the_home(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    workspace = home.root if where == "home" else home.root.parent
    write_config(
        f"providers:\n  m: {{type: mock}}\nagents:\n  main: {{model: m/x}}\n"
        f"  wide: {{model: m/x, workspace: {workspace}}}\n"
    )
    assert main(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    warned = [line for line in lines if line.startswith("WARN  workspace wide: ")]
    assert len(warned) == 1 and f"contains the Habakkuk home {home.root}" in warned[0]
    assert "the agent's tools could reach the home's own files" in warned[0]
    assert "point the workspace elsewhere" in warned[0]
    assert not any(line.startswith("WARN  workspace main") for line in lines)


def test_doctor_gives_up_on_a_server_that_never_answers(
    home: Home,
    write_config: WriteConfig,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import habakkuk.services.doctor

    # it never answers anyway
    monkeypatch.setattr(habakkuk.services.doctor, "MCP_PROBE_SECONDS", 0.5)
    write_config(
        "providers:\n  m: {type: mock}\nagents:\n  main: {model: m/x}\n"
        f"mcp_servers:\n  hang: {{command: {sys.executable}, args: [{SERVERS}, stdio, hang]}}\n"
    )
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  mcp hang: does not start: no answer to initialize within 0.5s" in out


def test_run_offers_a_config_mcp_server_to_an_agent_on_the_default_toolsets(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    # The user adds a server to mcp_servers: and nothing else; `run` can use its tools.
    write_config(
        f"""
        providers:
          mock:
            type: mock
            script:
              - tool_calls: [{{name: mcp__zoo__add, arguments: {{a: 2, b: 40}}}}]
              - after: {{ok: "the zoo answered", error: "the call failed"}}
        agents:
          main: {{model: mock/x, mode: full}}
        mcp_servers:
          zoo: {{command: {sys.executable}, args: [{SERVERS}, stdio, basic]}}
        """
    )
    code, body = run_json(capsys, "add two numbers")
    assert (code, body["reply"]) == (0, "the zoo answered")


def test_doctor_and_mcp_say_which_agents_a_servers_tools_reach(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(
        f"""
        providers:
          m: {{type: mock}}
        agents:
          main: {{model: m/x}}
          lean: {{model: m/x, toolsets: [core]}}
        mcp_servers:
          good: {{command: {sys.executable}, args: [{SERVERS}, stdio, basic]}}
        """
    )
    assert main(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"ok    mcp good: answered initialize; {REACHES_MAIN}" in lines
    write_config(
        f"""
        providers:
          m: {{type: mock}}
        agents:
          lean: {{model: m/x, toolsets: [core]}}
        mcp_servers:
          good: {{command: {sys.executable}, args: [{SERVERS}, stdio, basic]}}
        """
    )
    assert main(["doctor"]) == 0  # a warning, not a failure
    lines = capsys.readouterr().out.splitlines()
    assert "ok    mcp good: answered initialize" in lines
    assert (
        'WARN  mcp good: no agent gets its tools: add "mcp:good" to an agent\'s toolsets '
        "(an agent with no toolsets: gets every MCP server)" in lines
    )


def test_doctor_checks_the_key_of_each_generation_provider(
    home: Home,
    write_config: WriteConfig,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_FAL", "k")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    write_config(
        "providers:\n  m: {type: mock}\nagents:\n  main: {model: m/x}\n"
        "images: {provider: fal, key_env: MY_FAL}\nvideo: {provider: gemini}\n"
    )
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "ok    images (fal): MY_FAL set" in out
    assert "FAIL  video (gemini): GEMINI_API_KEY is not set (environment or .env)" in out


def test_doctor_checks_the_speech_provider(
    home: Home,
    write_config: WriteConfig,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ELEVENLABS_API_KEY", raising=False)
    agent = "providers:\n  m: {type: mock}\nagents:\n  main: {model: m/x}\n"
    write_config(agent + "tts: {provider: elevenlabs}\n")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  tts (elevenlabs): ELEVENLABS_API_KEY is not set (environment or .env)" in out
    write_config(agent + "tts: {provider: espeak}\n")
    main(["doctor"])
    assert "ok    tts (espeak): /usr/bin/espeak-ng" in capsys.readouterr().out
