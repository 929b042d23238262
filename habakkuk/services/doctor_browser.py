"""The doctor's check of the browser toolset: which browser each agent that lists it
gets, and whether it runs with --no-sandbox (only when Habakkuk runs as root)."""

from __future__ import annotations

from typing import Literal

from habakkuk.engine.config import Config
from habakkuk.engine.i18n import t

# (status, name, detail): doctor.py makes each a Check (no import back: no cycle).
Found = tuple[Literal["ok", "WARN"], str, str]


def browser_checks(config: Config) -> list[Found]:
    """One check per agent with the browser toolset."""
    from habakkuk.tools.browser.fleet import agent_settings
    from habakkuk.tools.browser.launcher import find_binary, needs_no_sandbox

    settings = agent_settings(config)
    checks: list[Found] = []
    for name, agent in sorted(config.agents.items()):
        if "browser" not in agent.toolsets:
            continue
        browser = settings(name)
        where = f"browser {name}"
        if browser.mode == "connect":
            checks.append(("ok", where, t("cli.doctor.browser_connect", url=browser.cdp_url)))
            continue
        found = find_binary(browser.binary)
        if found is None:
            wanted = browser.binary or "chromium"
            checks.append(("WARN", where, t("cli.doctor.browser_missing", wanted=wanted)))
        elif needs_no_sandbox():
            checks.append(("ok", where, t("cli.doctor.browser_no_sandbox", path=found)))
        else:
            checks.append(("ok", where, found))
    return checks
