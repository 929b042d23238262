"""The app-token platforms' fakes and drivers as fixtures (imported by conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.fake_dingtalk import DingTalkDriver, FakeDingTalk
from tests.channels.fake_feishu import FakeFeishu, FeishuDriver
from tests.channels.fake_wecom import FakeWeCom, WeComDriver
from tests.channels.platform_driver import PlatformDriver


@pytest.fixture
async def fake_feishu() -> AsyncIterator[FakeFeishu]:
    """The fake Feishu Open API and event caller on a loopback port."""
    async with FakeFeishu() as fake:
        yield fake


@pytest.fixture
def feishu_driver(fake_feishu: FakeFeishu) -> PlatformDriver:
    """Alice in a private chat with the bot on the fake Feishu (a FeishuDriver); the
    table points the fake's event subscription at the runtime's HTTP server."""
    return FeishuDriver(fake_feishu)


@pytest.fixture
async def fake_dingtalk() -> AsyncIterator[FakeDingTalk]:
    """The fake DingTalk OpenAPI, session webhooks and robot caller on a loopback port."""
    async with FakeDingTalk() as fake:
        yield fake


@pytest.fixture
def dingtalk_driver(fake_dingtalk: FakeDingTalk) -> PlatformDriver:
    """Alice in a one-to-one chat with the robot on the fake DingTalk (a DingTalkDriver)."""
    return DingTalkDriver(fake_dingtalk)


@pytest.fixture
async def fake_wecom() -> AsyncIterator[FakeWeCom]:
    """The fake WeCom API and callback caller on a loopback port."""
    async with FakeWeCom() as fake:
        yield fake


@pytest.fixture
def wecom_driver(fake_wecom: FakeWeCom) -> PlatformDriver:
    """Alice talking to the app on the fake WeCom (a WeComDriver)."""
    return WeComDriver(fake_wecom)
