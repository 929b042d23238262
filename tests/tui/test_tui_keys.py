"""Keys in the chat: they apply in the order they came, however fast, and none is dropped."""

from __future__ import annotations

import json
from typing import Any

from textual import events
from textual.app import App

from habakkuk.widgets.composer import Composer
from habakkuk.widgets.message_view import MessageView
from habakkuk.widgets.tool_card import ToolCard
from habakkuk.widgets.user_message import UserMessage
from tests.conftest import WriteConfig, mock_config
from tests.helpers import eventually
from tests.tui.conftest import make_app, ready, running

# Keys without a character of their own (the rest are typed as themselves).
NAMED = {"ctrl+j": "\n", "enter": "\r", "backspace": "\x08", "left": None, "right": None}


def type_at_once(app: Any, *keys: str) -> None:
    """Hand the app every key in one go, as a terminal does when keys come faster than
    frames (tmux send-keys, a paste of keystrokes): nothing runs between two keys."""
    for key in keys:
        event = events.Key(key, NAMED[key]) if key in NAMED else events.Key(key, key)
        app.post_message(event)


def composer(app: App[Any]) -> Composer:
    return app.screen.query_one(Composer)


async def test_keys_typed_at_once_apply_in_order(write_config: WriteConfig) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        # The example: Ctrl+J between words, sent faster than frames.
        type_at_once(app, *"one", "ctrl+j", *"two", "ctrl+j", *"three")
        await eventually(lambda: len(composer(app).text) >= 13, what="the keys to land")
        await pilot.pause()
        assert composer(app).text == "one\ntwo\nthree"
        # Editing keys (bindings of the text area) keep their place among the letters too.
        composer(app).clear()
        type_at_once(app, *"abc", "backspace", "d", "left", "left", "X")
        await eventually(lambda: "X" in composer(app).text, what="the X to land")
        await pilot.pause()
        assert composer(app).text == "aXbd"


async def test_enter_sends_exactly_the_text_typed_before_it(write_config: WriteConfig) -> None:
    write_config(mock_config('- text: "got it"'))
    app = make_app(None)
    async with running(app, size=(80, 24)) as ui:
        type_at_once(app, *"hi", "enter", *"next")
        await eventually(lambda: composer(app).text == "next", what="the next draft")
        await ui.turn_finished()
        assert [u.text for u in app.screen.query(UserMessage)] == ["hi"]
        assert composer(app).text == "next"


EXEC = """
- tool_calls:
    - name: exec
      arguments: {command: "echo card-output"}
- text: "ran it"
"""


async def test_text_typed_while_a_card_has_the_focus_goes_to_the_composer(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config(EXEC, mode="full"))
    app = make_app(None)
    async with running(app, size=(80, 24)) as ui:
        await ui.send("run")
        assert await ui.turn_finished() == "done"
        card = app.screen.query_one(ToolCard)
        card.focus()
        await ui.pilot.pause()
        assert app.focused is card
        type_at_once(app, *"hello")
        await eventually(lambda: composer(app).text == "hello", what="the typed text")
        assert composer(app).has_focus
        # Keys the card binds keep their meaning: Enter opens it.
        card.focus()
        await ui.press("enter")
        assert card.expanded and composer(app).text == "hello"
        # The conversation itself, focused, passes typing on as well.
        app.screen.query_one(MessageView).focus()
        await ui.press("!")
        assert composer(app).text == "hello!" and composer(app).has_focus


LONG = "\n\n".join(f"Paragraph {n}: some words to fill the chat." for n in range(60))


async def test_page_keys_in_the_composer_scroll_the_chat(write_config: WriteConfig) -> None:
    write_config(mock_config(f"- text: {json.dumps(LONG)}"))
    app = make_app(None)
    async with running(app, size=(80, 24)) as ui:
        await ui.send("long please")
        assert await ui.turn_finished() == "done"
        view = app.screen.query_one(MessageView)
        await eventually(lambda: view.max_scroll_y > 40, what="a reply taller than the view")
        await eventually(lambda: view.scroll_y == view.max_scroll_y, what="the bottom")
        bottom = view.scroll_y
        await ui.press("pageup")
        await eventually(lambda: view.scroll_y < bottom, what="PageUp to scroll up")
        assert app.focused is composer(app)
        await ui.press("home")  # an empty composer: Home goes to the top
        await eventually(lambda: view.scroll_y == 0, what="Home to reach the top")
        await ui.press("pagedown")
        await eventually(lambda: view.scroll_y > 0, what="PageDown to scroll down")
        await ui.press("ctrl+end")
        await eventually(lambda: view.scroll_y == view.max_scroll_y, what="Ctrl+End")
        await ui.press("ctrl+home")
        await eventually(lambda: view.scroll_y == 0, what="Ctrl+Home")
        await ui.press("end")
        await eventually(lambda: view.scroll_y == view.max_scroll_y, what="End")
        # With text in the composer, Home and End move the cursor on its line instead.
        await ui.press(*"abc", "home")
        assert composer(app).cursor_location == (0, 0)
        assert view.scroll_y == view.max_scroll_y
        await ui.press("end")
        assert composer(app).cursor_location == (0, 3)
