"""Enabled plugins merge into the loaded config: servers, hooks, skills and commands; a
broken plugin is one problem line and never fatal; nothing loads before enable."""

from __future__ import annotations

from habakkuk.engine.config import load_config
from habakkuk.engine.home import Environment, Home
from habakkuk.engine.hooks import Hooks
from habakkuk.engine.timeouts import wait_within
from habakkuk.engine.toolkit.registry import ToolRegistry
from habakkuk.knowledge.plugins.manage import Plugins
from habakkuk.protocols.mcp.manager import McpManager
from tests.knowledge.plugins.conftest import Install

BOUND = 120.0  # server processes start slowly on a loaded machine


def test_nothing_in_a_plugin_loads_before_it_is_enabled(home: Home, install: Install) -> None:
    install()
    config = load_config(home)
    assert config.mcp_servers == {}
    assert config.hooks == []
    assert config.plugin_commands == {}
    assert config.plugin_problems == []
    assert "mcp:tools" not in config.agent("main").toolsets


async def test_an_enabled_plugins_server_is_an_mcp_toolset_until_disabled(
    home: Home, install: Install
) -> None:
    folder = install()
    Plugins(home.root).enable("tools")
    config = load_config(home)
    assert config.plugin_problems == []
    assert config.mcp_servers["tools"].cwd == folder
    assert "mcp:tools" in config.agent("main").toolsets  # on the default toolsets
    assert config.agent("picky").toolsets == ["core"]  # listed its own: exactly that
    registry = ToolRegistry()
    manager = McpManager(config, Environment(home.env_path), home, registry)
    try:
        await wait_within(manager.start(BOUND), BOUND)
        names = [t.name for t in registry.tools_for(["mcp:tools"])]
        assert "mcp__tools__echo" in names, manager.status()
    finally:
        await manager.close()

    Plugins(home.root).disable("tools")
    config = load_config(home)
    assert "tools" not in config.mcp_servers
    assert "mcp:tools" not in config.agent("main").toolsets


async def test_a_plugins_hook_runs_in_the_plugin_folder(home: Home, install: Install) -> None:
    folder = install(enabled=True)
    config = load_config(home)
    [hook] = config.hooks
    assert (hook.plugin, hook.cwd) == ("tools", folder)
    reason = await Hooks(config.hooks, home.root).guard("tool_before", "exec", {"tool": "exec"})
    assert reason == str(folder)  # the blocking hook's stdout: `pwd` in the plugin folder


def test_a_broken_plugin_is_one_problem_line_and_the_others_load(
    home: Home, install: Install
) -> None:
    install(enabled=True)
    install("broken", "name: broken\ndescription: x\nhooks:\n  - event: nope\n", enabled=True)
    install("gone", enabled=True)
    (home.root / "plugins" / "gone" / "habakkuk-plugin.yaml").unlink()
    install("badyaml", "name: badyaml\ndescription: [unclosed\n", enabled=True)
    config = load_config(home)
    problems = config.plugin_problems
    assert len(problems) == 3, problems
    by_plugin = {line.split(":", 1)[0]: line for line in problems}
    assert "habakkuk-plugin.yaml:4: hooks[0].event: must be one of" in by_plugin["plugin broken"]
    assert "habakkuk-plugin.yaml: missing" in by_plugin["plugin gone"]
    assert "habakkuk-plugin.yaml:3: invalid YAML" in by_plugin["plugin badyaml"]
    assert all("\n" not in line for line in problems)
    assert list(config.mcp_servers) == ["tools"]
    assert sorted(config.plugin_commands) == ["standup", "where"]


def test_several_servers_are_named_after_the_plugin_and_skills_are_shared(
    home: Home, install: Install
) -> None:
    manifest = (
        "name: multi\ndescription: two servers\nmcp_servers:\n"
        "  a: {command: ./a.sh}\n  b: {url: 'http://127.0.0.1:9/mcp'}\n"
    )
    folder = install(
        "multi", manifest, enabled=True, files={"skills/notes/SKILL.md": "---\nname: notes\n"}
    )
    config = load_config(home)
    assert config.plugin_problems == []
    assert sorted(config.mcp_servers) == ["multi-a", "multi-b"]
    assert config.mcp_servers["multi-a"].command == str(folder / "a.sh")
    assert {"mcp:multi-a", "mcp:multi-b"} <= set(config.agent("main").toolsets)
    assert config.plugin_skill_dirs == [("multi", folder / "skills")]


def test_a_server_name_config_yaml_uses_skips_the_plugin(home: Home, install: Install) -> None:
    install(enabled=True)
    text = home.config_path.read_text() + "mcp_servers:\n  tools:\n    command: /bin/true\n"
    home.config_path.write_text(text)
    config = load_config(home)
    assert config.mcp_servers["tools"].command == "/bin/true"
    [problem] = config.plugin_problems
    assert "the name 'tools' is taken" in problem
    assert config.plugin_commands == {}


async def test_doctor_reports_a_plugin_that_failed_to_load(home: Home, install: Install) -> None:
    from habakkuk.services.doctor import run_checks

    install("broken", "name: broken\ndescription: x\nhooks:\n  - event: nope\n", enabled=True)
    lines = [check.line() for check in await run_checks(home) if check.name == "plugins"]
    assert len(lines) == 1 and lines[0].startswith("WARN  plugins: plugin broken: "), lines
