"""An image in the conversation (a chat's photo, a tool's picture) is a card in the
terminal: its name, size and where it is stored; Enter opens it with the system's opener
(a real `xdg-open` on PATH, here a script that records what it was asked to open), and
without one the card says where the file is."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from habakkuk.engine.llm.types import ImageBlock, Message, TextBlock
from habakkuk.widgets.file_card import FileCard
from tests.helpers import eventually
from tests.tui.conftest import ChatApp, Running

PNG = b"\x89PNG\r\n\x1a\n" + bytes(2040)


async def _session_with_a_photo(ui: Running) -> Path:
    """A session whose user sent a photo (as a Telegram photo arrives), opened in the chat."""
    runtime = ui.runtime
    blob = await runtime.blobs.put(PNG, ".png")
    session = await runtime.sessions.new_session(None, origin="test")
    await runtime.sessions.seed_session(
        session.id,
        [
            Message(
                "user",
                [
                    TextBlock("what is in this photo?"),
                    ImageBlock("image/png", blob=str(blob), name="photo.png"),
                ],
            ),
            Message("assistant", [TextBlock("A blank picture.")]),
        ],
    )
    await ui.chat.open_session(session.id).wait()
    return blob


def _opener(directory: Path, record: Path) -> None:
    for name in ("xdg-open", "open"):  # the opener of Linux and the BSDs, and of macOS
        script = directory / name
        script.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {record}\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)


async def test_an_attached_image_is_a_card_that_opens_with_the_system_opener(
    chat_app: ChatApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "opened.txt"
    _opener(bin_dir, record)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    async with chat_app() as ui:
        blob = await _session_with_a_photo(ui)
        [card] = ui.screen.query(FileCard)
        shown = str(card.render())
        assert "photo.png" in shown and "2.0 KB" in shown and str(blob) in shown
        card.focus()
        await ui.press("enter")
        await eventually(record.exists, what="the opener to run")
        assert record.read_text() == str(blob)
        await eventually(lambda: "Opened photo.png" in ui.toasts(), what="the card's notice")


async def test_without_an_opener_the_card_says_where_the_file_is(
    chat_app: ChatApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with chat_app() as ui:
        blob = await _session_with_a_photo(ui)
        [card] = ui.screen.query(FileCard)
        monkeypatch.setenv("PATH", str(tmp_path))  # no xdg-open, no open
        await eventually(lambda: bool(card.region), what="the card to be laid out")
        await ui.pilot.pause()
        assert await ui.pilot.click(FileCard, offset=(5, 1))
        expected = f"No opener on this system; the file is at {blob}"
        await eventually(lambda: expected in ui.toasts(), what="the card's notice")
        assert card.has_focus


async def test_an_image_gone_from_the_store_is_a_card_that_says_so(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        blob = await _session_with_a_photo(ui)
        blob.unlink()
        await ui.chat.open_session(ui.chat.session_id).wait()
        [card] = ui.screen.query(FileCard)
        assert "no longer stored" in str(card.render())
        card.focus()
        await ui.press("enter")
        expected = f"photo.png is no longer stored ({blob})"
        await eventually(lambda: expected in ui.toasts(), what="the card's notice")


VIEW_SCRIPT = """
- tool_calls:
    - name: view_image
      arguments: {path: "shot.png"}
- text: "A small picture."
"""


async def test_an_image_a_tool_shows_the_model_is_a_card_once_the_turn_ends(
    chat_app: ChatApp,
) -> None:
    from PIL import Image

    async with chat_app(VIEW_SCRIPT, mode="full") as ui:
        workspace = ui.runtime.home.default_workspace("main")
        workspace.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (8, 8), (10, 10, 200)).save(workspace / "shot.png")
        await ui.send("look at shot.png")
        assert await ui.turn_finished() == "done"
        await eventually(lambda: ui.screen.query(FileCard), what="the image's card")
        [card] = ui.screen.query(FileCard)
        assert card.media_type.startswith("image/") and card.path.is_file()
        assert card.file_size == card.path.stat().st_size
        # Opened again, the session shows the same card from its transcript.
        await ui.chat.open_session(ui.chat.session_id).wait()
        [stored] = ui.screen.query(FileCard)
        assert stored.path == card.path
