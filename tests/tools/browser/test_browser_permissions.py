"""The browser tools in the registry's decision path (network risk run unasked in
workspace mode and tainting the turn, evaluate as exec, read-only denying them), and the
doctor's line for each agent that has the toolset."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from habakkuk.engine.browser_config import BrowserConfig
from habakkuk.engine.config import AgentConfig, Config
from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.toolkit.registry import ToolRegistry
from habakkuk.services import doctor_browser
from habakkuk.tools.browser import launcher
from habakkuk.tools.browser.tools import browser_tools
from tests.helpers import tool_context


def _registry() -> tuple[ToolRegistry, set[str]]:
    registry = ToolRegistry()
    for tool in browser_tools(None):
        registry.register(tool, "browser")
    return registry, {tool.name for tool in registry.tools_for(["browser"])}


async def test_network_browser_tools_run_unasked_in_workspace_mode_and_taint(
    tmp_path: Path,
) -> None:
    registry, allowed = _registry()
    assert len(allowed) == 14
    ctx = tool_context(tmp_path, mode="workspace")
    use = ToolUseBlock("c1", "browser_snapshot", {})
    result = await registry.call(use, ctx, allowed)
    assert result.text == "browser_snapshot: the browser is not available in this run"
    assert ctx.taint.reason == "browser_snapshot"


async def test_evaluate_is_exec_and_read_only_denies_every_browser_tool(tmp_path: Path) -> None:
    registry, allowed = _registry()
    evaluate = ToolUseBlock("c1", "browser_evaluate", {"expression": "1"})
    asked = await registry.call(evaluate, tool_context(tmp_path, mode="workspace"), allowed)
    assert "needs approval" in asked.text
    readonly = tool_context(tmp_path, mode="read-only")
    for name in ("browser_navigate", "browser_click"):
        args = {"url": "https://example.com/"} if name == "browser_navigate" else {"ref": 1}
        denied = await registry.call(ToolUseBlock("c2", name, args), readonly, allowed)
        assert denied.text == f"denied: {name} is not allowed in read-only mode"


def _config(browser: BrowserConfig) -> Config:
    config = Config(browser=browser)
    config.agents["web"] = AgentConfig(model="p/m", toolsets=["core", "browser"])
    config.agents["plain"] = AgentConfig(model="p/m")
    return config


def test_doctor_names_the_browser_and_says_when_it_runs_without_sandbox(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    checks = doctor_browser.browser_checks(_config(BrowserConfig(binary="/bin/sh")))
    assert checks == [
        (
            "ok",
            "browser web",
            "/bin/sh, started with --no-sandbox (Habakkuk runs as root, where Chromium's "
            "sandbox cannot run)",
        )
    ]
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert doctor_browser.browser_checks(_config(BrowserConfig(binary="/bin/sh"))) == [
        ("ok", "browser web", "/bin/sh")
    ]
    missing = doctor_browser.browser_checks(_config(BrowserConfig(binary="no-such-chrome")))
    assert missing[0][0] == "WARN" and "no-such-chrome not found" in missing[0][2]
    connect = BrowserConfig(mode="connect", cdp_url="http://127.0.0.1:9222")
    assert "http://127.0.0.1:9222" in doctor_browser.browser_checks(_config(connect))[0][2]


def test_no_sandbox_flag_only_for_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = launcher.LaunchSpec("chromium", tmp_path, proxy_port=5000)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    args = launcher.browser_args(spec)
    assert "--no-sandbox" not in args
    assert "--remote-debugging-pipe" in args and "--headless" in args
    assert "--proxy-server=http://127.0.0.1:5000" in args and "--disable-quic" in args
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert "--no-sandbox" in launcher.browser_args(spec)
