"""Every chat platform's module provides what the channel service and setup use."""

from __future__ import annotations

import inspect
import stat
from pathlib import Path

import pytest

from habakkuk.channels.adapter import FatalAdapterError
from habakkuk.channels.platforms import (
    PLATFORM_MODULES,
    AdapterContext,
    PlatformSetup,
    platform_module,
)
from habakkuk.channels.store import ChannelStore
from habakkuk.engine.channel_config import PLATFORM_SETTINGS, ChannelConfig
from habakkuk.engine.store import SqliteDatabase


@pytest.mark.parametrize("kind", sorted(PLATFORM_MODULES))
def test_each_platform_module_builds_adapters_and_has_a_setup_step(kind: str) -> None:
    module = platform_module(kind)
    assert callable(module.build)
    assert list(inspect.signature(module.build).parameters) == ["config", "context"]
    setup = module.SETUP
    assert isinstance(setup, PlatformSetup) and setup.type == kind
    accepted = PLATFORM_SETTINGS[kind].accepted | {"allow_from", "groups"}
    for item in setup.fields:
        assert item.key in accepted, f"{kind} asks for {item.key}, not a {kind} setting"
        assert not item.secret or item.key.endswith("_env"), item.key


def test_every_platform_with_a_module_has_its_settings() -> None:
    assert set(PLATFORM_MODULES) <= set(PLATFORM_SETTINGS)


def test_an_unknown_platform_is_a_one_line_fatal_error() -> None:
    with pytest.raises(FatalAdapterError, match="no chat platform is called 'pigeon'"):
        platform_module("pigeon")


class NoSecrets:
    def get(self, name: str) -> str | None:
        return None


async def test_a_missing_secret_names_the_setting_and_the_variable(tmp_path: Path) -> None:
    db = await SqliteDatabase.open(tmp_path / "control.db", [])
    try:
        context = AdapterContext(NoSecrets(), ChannelStore(db), tmp_path / "channels")
        config = ChannelConfig(type="telegram", token_env="TG_TOKEN")
        config.name = "tg"
        with pytest.raises(FatalAdapterError, match=r"channels\.tg\.token_env: .*TG_TOKEN"):
            platform_module("telegram").build(config, context)
        path = context.state_path(config)
        assert path == tmp_path / "channels" / "telegram-tg.json"
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    finally:
        await db.close()
