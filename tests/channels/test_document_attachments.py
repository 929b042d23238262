"""A document sent in a Telegram chat reaches the model as its extracted text, through the
real gateway, the fake Telegram Bot API and the fake model server (OpenAI's wire)."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from habakkuk.channels.attachments import ATTACHMENT_KIND
from habakkuk.engine.llm.types import ContextBlock, TextBlock
from habakkuk.runtime import Runtime
from tests.channels.fake_telegram import FakeTelegram
from tests.fakes.model_server import FakeModelServer, Reply
from tests.tools.document_files import docx_bytes, xlsx_bytes

DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def config(tg: FakeTelegram, model_url: str) -> str:
    return textwrap.dedent(
        f"""
        providers:
          remote:
            type: openai
            base_url: {model_url}/v1
            key_env: REMOTE_KEY
        agents:
          main:
            model: remote/gpt-fake
            mode: full
        channels:
          tg:
            type: telegram
            token_env: TG_TOKEN
            base_url: {tg.base_url}
            allow_from: ["42"]
            poll_timeout: 1
        """
    )


@pytest.fixture
async def running(
    runtime_factory: Any,
    tg: FakeTelegram,
    model_server: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Runtime:
    monkeypatch.setenv("REMOTE_KEY", "k")
    runtime: Runtime = await runtime_factory(config(tg, model_server.base_url))
    runtime.start_workers()
    assert runtime.channels is not None
    await runtime.channels.started()
    return runtime


def document(file_id: str, name: str, media_type: str, size: int) -> dict[str, Any]:
    return {"file_id": file_id, "file_unique_id": f"u-{file_id}", "file_name": name,
            "mime_type": media_type, "file_size": size}  # fmt: skip


def sent_text(model_server: FakeModelServer) -> str:
    """Everything the last model request carried, as JSON text."""
    return json.dumps(model_server.requests[-1].json, ensure_ascii=False)


async def test_a_telegram_docx_reaches_the_model_as_its_text_and_the_transcript_keeps_it_apart(
    running: Runtime, tg: FakeTelegram, model_server: FakeModelServer
) -> None:
    model_server.script(Reply(text="A plan in two parts, starting in May."))
    data = docx_bytes(
        ["The plan has two parts.", "Both start in May."], footnote="Parts may overlap."
    )
    tg.add_file("DOC1", data, "documents/file_3.docx")
    tg.message(
        caption="summarise this", document=document("DOC1", "plan.docx", DOCX_TYPE, len(data))
    )
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    assert tg.texts() == ["A plan in two parts, starting in May."]
    sent = sent_text(model_server)
    assert "The plan has two parts.[1]\\nBoth start in May." in sent
    assert "[1] Parts may overlap." in sent
    [session] = await running.sessions.list_sessions()
    first = (await running.sessions.messages(session.id))[0].message
    text = first.blocks[0]
    assert isinstance(text, TextBlock)
    assert text.text.startswith("summarise this\n\n[attachment saved to inbox/")
    assert "two parts" not in text.text  # the user's words and the note, not the document
    [context] = [
        b for b in first.blocks if isinstance(b, ContextBlock) and b.kind == ATTACHMENT_KIND
    ]
    assert context.text.startswith("[attached file inbox/")
    assert "-plan.docx (DOCX); its text:]\nThe plan has two parts.[1]" in context.text


async def test_a_long_sheet_is_cut_with_a_note_and_a_locked_file_is_named(
    running: Runtime, tg: FakeTelegram, model_server: FakeModelServer
) -> None:
    model_server.script(Reply(text="Lots of rows."), Reply(text="That one is locked."))
    rows: list[list[str | int | float]] = [[f"item {n}", n, "y" * 40] for n in range(1, 4001)]
    sheet = xlsx_bytes({"Stock": rows})
    tg.add_file("XLS1", sheet, "documents/file_4.xlsx")
    tg.message(document=document("XLS1", "stock.xlsx", "application/octet-stream", len(sheet)))
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    sent = sent_text(model_server)
    assert "--- sheet Stock ---\\nitem 1\\t1\\t" in sent
    assert "item 4000" not in sent  # cut at 100 KB, not 400
    assert "[output cut at 100 KB, in sheet 'Stock', row " in sent
    assert "(with read_document on inbox/" in sent
    locked = bytes.fromhex("D0CF11E0A1B11AE1") + bytes(504) + "EncryptionInfo".encode("utf-16-le")
    tg.add_file("LOCK1", locked, "documents/file_5.docx")
    tg.message(document=document("LOCK1", "secret.docx", DOCX_TYPE, len(locked)))
    await tg.wait_for(lambda: len(tg.texts()) == 2)
    assert "secret.docx could not be read: " in sent_text(model_server)
    assert "is a password-protected Office document" in sent_text(model_server)
