"""The web chat in the one table (tests/channels/test_every_platform.py) answers an
approval by its card's buttons; a person who types yes or no in the chat instead, as on
a platform without buttons, answers it too: the same rows, the buttons left unpressed."""

from __future__ import annotations

from typing import Any

import pytest

from habakkuk.engine.home import Home
from tests.channels.test_every_platform import (
    test_the_same_conversation_on_every_platform as hold,
)
from tests.channels.web_driver import WebDriver


@pytest.mark.parametrize("name", ["approve", "deny"])
async def test_a_web_approval_is_answered_by_a_typed_word_too(
    name: str, runtime_factory: Any, home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = WebDriver()
    driver.has_buttons = False  # the row types its answer
    try:
        await hold(name, driver, runtime_factory, home, monkeypatch)
        assert driver.texts()[-1] == "all done"
        assert driver.presses == 0
    finally:
        await driver.close()
