"""Habakkuk as an MCP client, against real SDK servers run as processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Environment, Home
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import ToolError, ToolRegistry
from habakkuk.protocols.mcp.manager import McpManager, ServerLink
from habakkuk.protocols.mcp.naming import tool_names
from tests.helpers import tool_context

SERVERS = Path(__file__).with_name("mcp_servers.py")
BOUND = 120.0  # generous: server processes start slowly on a loaded machine


def server_entry(name: str, mode: str, extra: str = "") -> str:
    lines = [
        f"  {name}:",
        f"    command: {sys.executable}",
        f"    args: [{SERVERS}, stdio, {mode}]",
    ]
    lines += [f"    {line}" for line in extra.strip().splitlines() if line.strip()]
    return "\n".join(lines) + "\n"


def config_text(servers: str, toolsets: str = '[core, "mcp:zoo"]', mode: str = "full") -> str:
    return (
        "providers:\n  mock:\n    type: mock\n"
        f"agents:\n  main:\n    model: mock/x\n    mode: {mode}\n    toolsets: {toolsets}\n"
        "mcp_servers:\n" + servers
    )


@contextlib.asynccontextmanager
async def manager_for(home: Home, text: str, wait: float = BOUND) -> AsyncIterator[McpManager]:
    config = parse_config(text, home.config_path, home)
    registry = ToolRegistry()
    manager = McpManager(config, Environment(home.env_path), home, registry)
    try:
        await asyncio.wait_for(manager.start(wait), BOUND)
        yield manager
    finally:
        await manager.close()


async def wait_until(server: ServerLink, predicate: Any, what: str) -> None:
    """Wait (bounded) until the link's state satisfies `predicate`."""
    try:
        await asyncio.wait_for(server.wait_for(predicate), BOUND)
    except TimeoutError:
        pytest.fail(f"never happened: {what}")


async def wait_exit(pid: int) -> None:
    """Wait (bounded) until process `pid`, not our child, has exited (pidfd)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    gone = asyncio.Event()
    loop.add_reader(fd, gone.set)
    try:
        await asyncio.wait_for(gone.wait(), BOUND)
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def link(manager: McpManager, name: str) -> ServerLink:
    return manager.links[name]


# -- names ---------------------------------------------------------------------------------


def test_tool_names_are_sanitized_cut_and_hashed_deterministically() -> None:
    tools = ["echo", "dotted.name", "dotted_name", "x" * 80, "ünï"]
    names = tool_names("git-hub", tools)
    assert names["echo"] == "mcp__git-hub__echo"
    assert names["ünï"] == "mcp__git-hub___n_"
    # two names that sanitize alike both get a hash of their own original
    assert names["dotted.name"] != names["dotted_name"]
    assert names["dotted.name"].startswith("mcp__git-hub__dotted_name_")
    assert all(len(n) <= 64 for n in names.values())
    assert len(names["x" * 80]) == 64
    # the order the server lists its tools in never changes a spelling
    assert tool_names("git-hub", list(reversed(tools))) == names


# -- config --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("servers", "toolsets", "message"),
    [
        ("  a:\n    command: x\n", '[core, "mcp:b"]', "names an unconfigured MCP server"),
        ("  a:\n    command: x\n    url: http://h/mcp\n", "[core]", "either command"),
        ("  a:\n    url: http://h/mcp\n    env: {A: B}\n", "[core]", "only for command"),
        ("  a:\n    command: x\n    env: {A: 'sk-live-123'}\n", "[core]", "must name a variable"),
        ("  a:\n    command: x\n    timeout: soon\n", "[core]", "is not a duration"),
        ("  a:\n    command: x\n    risk: huge\n", "[core]", "must be one of read"),
        ("  a:\n    command: x\n    colour: red\n", "[core]", "unknown key"),
    ],
)
def test_bad_mcp_config_is_a_one_line_error(
    home: Home, servers: str, toolsets: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config_text(servers, toolsets), home.config_path, home)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert str(home.config_path) in str(caught.value)


def test_mcp_config_defaults(home: Home) -> None:
    config = parse_config(
        config_text("  zoo:\n    url: https://h/mcp\n    timeout: 2m\n"), home.config_path, home
    )
    server = config.mcp_servers["zoo"]
    assert (server.risk, server.timeout_seconds, server.allow) == ("network", 120.0, None)
    assert config.agents["main"].tool_search_over == 60
    assert config.mcp_server.http is False and config.mcp_server.allow_send is False


# -- a live stdio server -------------------------------------------------------------------


async def test_stdio_tools_join_the_registry_and_results_are_converted(home: Home) -> None:
    text = config_text(server_entry("zoo", "basic", "approve: [echo]\nrisk: write"))
    async with manager_for(home, text) as manager:
        zoo = link(manager, "zoo")
        assert zoo.state == "up", zoo.error
        registry = manager.registry
        assert registry is not None
        names = [t.name for t in registry.tools_for(["mcp:zoo"])]
        assert "mcp__zoo__echo" in names and "mcp__zoo__huge" in names
        assert sorted(names) == sorted(tool_names("zoo", zoo.tools).values())
        assert all(len(n) <= 64 for n in names)

        echo, ctx = zoo.tools["echo"], tool_context(home.root)
        assert echo.risk_for({}, ctx) is Risk.EXEC
        assert zoo.tools["add"].risk_for({}, ctx) is Risk.WRITE
        assert echo.input_schema["properties"]["text"]["type"] == "string"

        out = await zoo.call("echo", {"text": "hi"})
        assert (out.text, out.is_error) == ("echo: hi", False)
        out = await zoo.call("add", {"a": 2, "b": 3})
        assert '"sum": 5' in out.text and out.text.count("sum") == 1
        out = await zoo.call("picture", {})
        assert out.text.startswith("[image: image/png,") and "not shown" in out.text
        out = await zoo.call("huge", {})
        assert len(out.text.encode()) < 1024 * 1024 + 200
        assert "result cut" in out.text
        out = await zoo.call("broken", {})
        assert out.is_error and "the widget is broken" in out.text


async def test_stdio_child_gets_only_path_home_and_named_variables(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEAKY_SECRET", "do-not-pass")
    home.env_path.write_text("ZOO_TOKEN_SOURCE=from-dotenv\n", encoding="utf-8")
    text = config_text(server_entry("zoo", "basic", "env: {ZOO_TOKEN: ZOO_TOKEN_SOURCE}"))
    async with manager_for(home, text) as manager:
        out = await link(manager, "zoo").call("env_names", {})
    import json

    names = set(json.loads(out.text))
    # Python itself may add LC_CTYPE (PEP 538); nothing else may appear
    assert names - {"LC_CTYPE"} == {"PATH", "HOME", "ZOO_TOKEN"}


async def test_missing_variable_names_itself_and_never_spawns(home: Home) -> None:
    text = config_text(server_entry("zoo", "basic", "env: {ZOO_TOKEN: NOT_SET_ANYWHERE}"))
    async with manager_for(home, text) as manager:
        zoo = link(manager, "zoo")
        assert zoo.state == "down"
        assert "NOT_SET_ANYWHERE" in (zoo.error or "")
        assert zoo.process.pid is None


async def test_dead_and_hanging_servers_never_block_startup(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    import habakkuk.protocols.mcp.manager as manager_module

    # Closing ends the hanging server's connect at once: it waits out no grace (one longer
    # than BOUND here; it was 15 s of every run of this test).
    monkeypatch.setattr(manager_module, "CLOSE_GRACE", 3600.0)
    servers = (
        server_entry("zoo", "basic")
        + server_entry("crash", "crash")
        + server_entry("hang", "hang")
        + "  missing:\n    command: /nonexistent/mcp-server\n"
    )
    # wait only until the others are settled: the hanging one must not hold start() up
    config = parse_config(config_text(servers), home.config_path, home)
    manager = McpManager(config, Environment(), home, ToolRegistry())
    try:
        starting = asyncio.create_task(manager.start(wait=3600))
        for name in ("zoo", "crash", "missing"):
            await asyncio.wait_for(link(manager, name).attempted.wait(), BOUND)
        assert not starting.done()  # still waiting, but only up to its cap
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        await asyncio.wait_for(manager.start(wait=0), BOUND)  # second start is a no-op

        assert link(manager, "zoo").state == "up"
        crash = link(manager, "crash")
        assert crash.state == "down" and "boom: missing configuration" in (crash.error or "")
        missing = link(manager, "missing")
        assert "'/nonexistent/mcp-server': no such file" in (missing.error or "")
        assert link(manager, "hang").state == "connecting"
        # a down server's error reaches the model at once through its tools' link
        with pytest.raises(ToolError, match=r"unavailable: .*boom"):
            await crash.call("anything", {})
        # the dead one keeps retrying in the background
        await wait_until(crash, lambda s: s.attempts >= 2, "a retry of the crashed server")
    finally:
        await asyncio.wait_for(manager.close(), BOUND)


async def test_a_failing_server_is_reported_once_however_often_it_is_retried(
    home: Home, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import habakkuk.protocols.mcp.manager as manager_module

    monkeypatch.setattr(manager_module, "BACKOFF_FIRST", 0.01)  # retry at once, often
    servers = server_entry("crash", "crash") + "  missing:\n    command: no-such-mcp-xyz\n"
    caplog.set_level("WARNING", logger="habakkuk.protocols.mcp.manager")
    async with manager_for(home, config_text(servers, toolsets="[core]")) as manager:
        for name in ("crash", "missing"):
            await wait_until(link(manager, name), lambda s: s.attempts >= 4, f"{name} retried")
    reports = [r.getMessage() for r in caplog.records]
    assert len(reports) == 2, reports
    assert any(m.startswith("mcp server crash: ") and "boom" in m for m in reports)
    assert any(m.startswith("mcp server missing: cannot start") for m in reports)


async def test_a_call_that_outlives_its_timeout_may_or_may_not_have_finished(home: Home) -> None:
    async with manager_for(home, config_text(server_entry("zoo", "basic", "timeout: 1s"))) as m:
        with pytest.raises(ToolError, match="timed out after 1s; it may or may not have finished"):
            await link(m, "zoo").call("stall", {})


async def test_crash_mid_call_says_it_may_have_run_and_reconnects_keeping_names(
    home: Home,
) -> None:
    async with manager_for(home, config_text(server_entry("zoo", "basic"))) as manager:
        zoo = link(manager, "zoo")
        registry = manager.registry
        assert registry is not None
        before = {t.name: t for t in registry.tools_for(["mcp:zoo"])}
        with pytest.raises(ToolError) as caught:
            await zoo.call("die", {})
        message = str(caught.value)
        assert "may or may not have run" in message and "dying on purpose" in message
        await wait_until(zoo, lambda s: s.state == "up" and s.attempts >= 2, "the reconnect")
        after = {t.name: t for t in registry.tools_for(["mcp:zoo"])}
        assert sorted(after) == sorted(before)
        out = await zoo.call("echo", {"text": "back"})
        assert out.text == "echo: back"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        status = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        if status == "Z":
            return False
    return True


async def test_shutdown_kills_the_servers_whole_process_group(home: Home) -> None:
    async with manager_for(home, config_text(server_entry("zoo", "basic"))) as manager:
        zoo = link(manager, "zoo")
        helper = int((await zoo.call("spawn_helper", {})).text)
        server_pid = zoo.process.pid
        assert server_pid is not None and _alive(helper)
        assert os.getpgid(helper) == server_pid  # own group, led by the server
        assert os.getpgid(server_pid) != os.getpgid(0)
    await wait_exit(helper)
    assert not _alive(helper) and not _alive(server_pid)


# -- Streamable HTTP -----------------------------------------------------------------------


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """The tool zoo over Streamable HTTP on 127.0.0.1; yields its /mcp URL."""
    portfile = tmp_path / "port"
    env = dict(os.environ, TEST_REQUIRED_AUTH="Bearer sesame")
    process = subprocess.Popen(
        [sys.executable, str(SERVERS), "http", str(portfile)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import time

        deadline = time.monotonic() + BOUND
        while not portfile.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the HTTP test server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{portfile.read_text().strip()}/mcp"
    finally:
        process.terminate()
        process.wait(30)


async def test_streamable_http_server_with_headers_from_variables(
    home: Home, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZOO_AUTH", "Bearer sesame")
    entry = f"  zoo:\n    url: {http_server}\n    headers: {{Authorization: ZOO_AUTH}}\n"
    entry += "    allow: [echo, picture]\n"
    async with manager_for(home, config_text(entry)) as manager:
        zoo = link(manager, "zoo")
        assert zoo.state == "up", zoo.error
        assert sorted(zoo.tools) == ["echo", "picture"]  # allow exposes only these
        assert (await zoo.call("echo", {"text": "web"})).text == "echo: web"


async def test_streamable_http_refusal_is_reported(
    home: Home, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZOO_AUTH", "Bearer wrong")
    entry = f"  zoo:\n    url: {http_server}\n    headers: {{Authorization: ZOO_AUTH}}\n"
    async with manager_for(home, config_text(entry)) as manager:
        zoo = link(manager, "zoo")
        assert zoo.state == "down"
        assert zoo.error


# -- through a real turn -------------------------------------------------------------------


async def test_an_agent_turn_calls_an_mcp_tool(home: Home, runtime_factory: Any) -> None:
    script = (
        "providers:\n  mock:\n    type: mock\n    script:\n"
        "      - tool_calls: [{name: mcp__zoo__echo, arguments: {text: from the model}}]\n"
        "      - text: finished\n"
    )
    text = (
        script
        + 'agents:\n  main:\n    model: mock/x\n    mode: full\n    toolsets: [core, "mcp:zoo"]\n'
        + "mcp_servers:\n"
        + server_entry("zoo", "basic")
    )
    runtime = await runtime_factory(text)
    await asyncio.wait_for(runtime.start_mcp(), BOUND)
    session = await runtime.sessions.new_session("main")
    runtime.start_workers()
    turn = await runtime.turns.submit(session.id, "use the zoo")
    outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), BOUND)
    assert outcome.status == "done", outcome.error
    results = [
        r for m in await runtime.sessions.messages(session.id) for r in m.message.tool_results
    ]
    assert [(r.text, r.is_error) for r in results] == [("echo: from the model", False)]


async def test_an_agent_on_the_default_toolsets_is_offered_a_config_servers_tools_and_calls_one(
    home: Home, runtime_factory: Any
) -> None:
    # No `toolsets:` for the agent: a server in config.yaml's mcp_servers reaches it, as an
    # enabled plugin's servers do; before, the call below was "unknown tool".
    text = (
        "providers:\n  mock:\n    type: mock\n    script:\n"
        "      - tool_calls: [{name: mcp__zoo__echo, arguments: {text: by default}}]\n"
        "      - text: finished\n"
        "agents:\n  main:\n    model: mock/x\n    mode: full\n"
        "mcp_servers:\n" + server_entry("zoo", "basic")
    )
    runtime = await runtime_factory(text)
    await asyncio.wait_for(runtime.start_mcp(), BOUND)
    agent = runtime.config.agent("main")
    assert "mcp:zoo" in agent.toolsets
    offered = {tool.name for tool in runtime.tools.tools_for(agent.toolsets)}
    assert {"mcp__zoo__echo", "mcp__zoo__add", "read_file", "memory_save"} <= offered
    session = await runtime.sessions.new_session("main")
    runtime.start_workers()
    turn = await runtime.turns.submit(session.id, "use the zoo")
    outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), BOUND)
    assert outcome.status == "done", outcome.error
    results = [
        r for m in await runtime.sessions.messages(session.id) for r in m.message.tool_results
    ]
    assert [(r.text, r.is_error) for r in results] == [("echo: by default", False)]


def test_mcp_command_lists_each_servers_state_and_tools(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    from habakkuk.cli import main

    servers = server_entry("zoo", "basic", "approve: [echo]") + server_entry("crash", "crash")
    servers += "  web:\n    url: http://127.0.0.1:9/mcp\n    headers: {X-Key: UNSET_KEY_VAR}\n"
    home.config_path.write_text(config_text(servers), encoding="utf-8")
    assert main(["mcp"]) == 1  # a server is down
    out = capsys.readouterr().out
    assert "zoo  [stdio]" in out and "up: 14 tools (toolset mcp:zoo)" in out
    # How the tools reach an agent: main lists its toolsets, naming only mcp:zoo.
    assert "  its tools reach agent main (toolset mcp:zoo)" in out
    assert '  no agent gets its tools: add "mcp:crash" to an agent\'s toolsets' in out
    assert "mcp__zoo__echo (asks first)" in out
    assert "crash  [stdio]" in out and "boom: missing configuration" in out
    assert "missing variables: UNSET_KEY_VAR" in out


async def test_a_server_that_never_answers_times_out_and_is_stopped(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    from habakkuk.protocols.mcp import manager as manager_module

    monkeypatch.setattr(manager_module, "CONNECT_TIMEOUT", 1.0)
    async with manager_for(home, config_text(server_entry("zoo", "hang")), wait=0) as manager:
        hang = link(manager, "zoo")
        await wait_until(hang, lambda s: s.state == "down", "the connect timeout")
        assert "no answer within 1s" in (hang.error or "")
        pid = hang.process.pid
        assert pid is not None
    await wait_exit(pid)
    assert not _alive(pid)
