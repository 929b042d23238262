"""Files dropped on the terminal's chat: their pasted paths become the message's
attachments through the channels' attachments rule, so the model request (the fake
model server, Anthropic Messages) carries the PDF and the image as blocks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from habakkuk.channels.attachments import MAX_ATTACHMENT_BYTES
from habakkuk.widgets.file_card import FileCard
from habakkuk.widgets.notice import Notice
from habakkuk.widgets.user_message import UserMessage
from tests.conftest import WriteConfig
from tests.fakes.media_gen import png
from tests.fakes.model_server import FakeModelServer, Reply
from tests.tui.conftest import make_app, running

PNG = png(4, 3)  # a real PNG: attachments are told images by their bytes
PDF = b"%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n"

CONFIG = """
providers:
  claude:
    type: anthropic
    base_url: {url}
    key_env: FAKE_KEY
title_model: off  # one model call per turn here: no background title
agents:
  main:
    model: claude/claude-fake
    mode: full
    workspace: {workspace}
"""


def _blocks(request: Any) -> list[dict[str, Any]]:
    """The content blocks of the request's last user message."""
    users = [m for m in request.json["messages"] if m["role"] == "user"]
    content = users[-1]["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


async def test_dropped_pdf_and_png_paths_reach_the_model_as_document_and_image_blocks(
    write_config: WriteConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "k")
    workspace = tmp_path / "ws"
    pdf = tmp_path / "drop zone" / "quarterly report.pdf"
    pdf.parent.mkdir()
    pdf.write_bytes(PDF)
    png = tmp_path / "shot.png"
    png.write_bytes(PNG)
    missing = tmp_path / "gone.pdf"
    async with FakeModelServer() as server:
        write_config(CONFIG.format(url=server.base_url, workspace=workspace))
        server.script(Reply("A report and a screenshot."), api="anthropic")
        async with running(make_app(None), size=(100, 30)) as ui:
            # As a terminal pastes two dropped files, with a question and a path to nothing.
            await ui.send(f"'{pdf}' {png} what are these? {missing}")
            assert await ui.turn_finished() == "done"
            [request] = [r for r in server.requests if r.api == "anthropic"]
            blocks = _blocks(request)
            [document] = [b for b in blocks if b["type"] == "document"]
            assert document["source"]["media_type"] == "application/pdf"
            [image] = [b for b in blocks if b["type"] == "image"]
            assert image["source"]["media_type"] == "image/png"
            text = "\n".join(b["text"] for b in blocks if b["type"] == "text")
            assert "what are these?" in text and str(missing) in text
            assert "inbox/quarterly_report.pdf" in text and "inbox/shot.png" in text
            assert str(pdf) not in text
            cards = {card.path for card in ui.screen.query(FileCard)}
            assert cards == {pdf, png}
            [said] = ui.screen.query(UserMessage)
            assert f"what are these? {missing}" in str(said.render())
    assert (workspace / "inbox" / "quarterly_report.pdf").read_bytes() == PDF
    assert (workspace / "inbox" / "shot.png").read_bytes() == PNG


async def test_a_dropped_file_over_the_size_cap_is_noted_not_attached(
    write_config: WriteConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "k")
    png = tmp_path / "big.png"
    with png.open("wb") as file:  # sparse: one byte over the cap costs no disk
        file.write(PNG)
        file.truncate(MAX_ATTACHMENT_BYTES + 1)
    async with FakeModelServer() as server:
        write_config(CONFIG.format(url=server.base_url, workspace=tmp_path / "ws"))
        server.script(Reply("Nothing came through."), api="anthropic")
        async with running(make_app(None), size=(100, 30)) as ui:
            await ui.send(str(png))
            assert await ui.turn_finished() == "done"
            [request] = [r for r in server.requests if r.api == "anthropic"]
            blocks = _blocks(request)
            assert {b["type"] for b in blocks} == {"text"}
            text = "\n".join(b["text"] for b in blocks)
            assert "[attachment big.png was too large to download]" in text
            assert not ui.screen.query(FileCard)
            assert any("too large" in n.text for n in ui.screen.query(Notice))
