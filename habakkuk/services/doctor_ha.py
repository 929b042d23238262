"""The doctor's checks of `homeassistant:`: the token set, the instance answering it,
and the toolset or a trigger in use (spec 000 "Home Assistant")."""

from __future__ import annotations

from typing import Literal

from habakkuk.engine.config import Config
from habakkuk.engine.home import Environment
from habakkuk.engine.i18n import t

# (status, name, detail): doctor.py makes each a Check (no import back: no cycle).
Found = tuple[Literal["ok", "WARN", "FAIL"], str, str]
PROBE_SECONDS = 5.0
NAME = "homeassistant"


async def homeassistant_checks(config: Config, env: Environment) -> list[Found]:
    """Nothing without the section; else the token and one GET /api/ with it."""
    section = config.homeassistant
    if section is None:
        return []
    from habakkuk.protocols.homeassistant.rest import HaClient, HaError, read_token

    checks: list[Found] = []
    try:
        token = await read_token(env, section.token_env)
        await HaClient(section.url, token, section.token_env, PROBE_SECONDS).get("")
        detail = t("cli.doctor.ha_answered", url=section.url, variable=section.token_env)
        checks.append(("ok", NAME, detail))
    except HaError as exc:
        checks.append(("FAIL", NAME, str(exc)))
    used = any("homeassistant" in agent.toolsets for agent in config.agents.values())
    if not used and not section.triggers:
        checks.append(("WARN", NAME, t("cli.doctor.ha_unused")))
    return checks
