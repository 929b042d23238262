"""`habakkuk doctor` with a homeassistant: section: the instance asked with the token."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from habakkuk.engine.home import Home
from habakkuk.services.doctor import Check, run_checks
from tests.conftest import WriteConfig, mock_config
from tests.fakes.home_assistant import TOKEN, FakeHomeAssistant


@pytest.fixture
async def ha() -> AsyncIterator[FakeHomeAssistant]:
    async with FakeHomeAssistant() as fake:
        yield fake


async def ha_checks(home: Home) -> list[Check]:
    return [check for check in await run_checks(home) if check.name == "homeassistant"]


async def test_doctor_says_the_instance_answered_the_token_or_why_not(
    ha: FakeHomeAssistant,
    home: Home,
    write_config: WriteConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LANG", "C.UTF-8")
    agent = mock_config().replace("mode: full\n", "mode: full\n    toolsets: [homeassistant]\n")
    write_config(agent + f"homeassistant:\n  url: {ha.url}\n")
    monkeypatch.setenv("HOMEASSISTANT_TOKEN", TOKEN)
    (ok,) = await ha_checks(home)
    assert (ok.status, ok.detail) == (
        "ok",
        f"{ha.url} answered with the token in HOMEASSISTANT_TOKEN",
    )
    monkeypatch.setenv("HOMEASSISTANT_TOKEN", "stale")
    (refused,) = await ha_checks(home)
    assert refused.status == "FAIL" and "refused the token in HOMEASSISTANT_TOKEN" in refused.detail
    monkeypatch.delenv("HOMEASSISTANT_TOKEN")
    (unset,) = await ha_checks(home)
    assert unset.status == "FAIL" and "HOMEASSISTANT_TOKEN is not set" in unset.detail


async def test_doctor_warns_when_nothing_uses_the_section(
    ha: FakeHomeAssistant,
    home: Home,
    write_config: WriteConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("HOMEASSISTANT_TOKEN", TOKEN)
    write_config(mock_config() + f"homeassistant:\n  url: {ha.url}\n")
    statuses = [check.status for check in await ha_checks(home)]
    assert statuses == ["ok", "WARN"]
