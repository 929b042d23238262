"""A document uploaded to the web chat reaches the model as its extracted text (the same
rule as a chat channel's attachments), a PDF as itself."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from habakkuk.engine.llm.types import ContextBlock, DocumentBlock
from tests.fakes.model_server import FakeModelServer, Reply
from tests.tools.document_files import pdf_bytes, pptx_bytes, xlsx_bytes


def remote(url: str) -> str:
    return (
        "providers:\n"
        f"  remote:\n    type: openai\n    base_url: {url}/v1\n    key_env: REMOTE_KEY\n"
        "agents:\n  main:\n    model: remote/gpt-fake\n    mode: full\n"
    )


async def upload(served: Any, conversation: str, files: list[tuple[str, bytes, str]]) -> Any:
    form = aiohttp.FormData()
    form.add_field("conversation", conversation)
    form.add_field("text", "what is in these?")
    for name, data, content_type in files:
        form.add_field("file", data, filename=name, content_type=content_type)
    headers = served.auth(**{"X-Habakkuk-Client": "test"})
    async with served.client.post(served.url + "/api/chat", data=form, headers=headers) as response:
        assert response.status == 202, await response.text()
        return await response.json()


async def test_uploaded_documents_reach_the_model_as_text_and_a_pdf_as_a_file(
    serve: Any, model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_KEY", "k")
    served = await serve(remote(model_server.base_url))
    model_server.script(Reply(text="A sheet, a deck and a report."))
    sheet = xlsx_bytes({"Budget": [["rent", 900], ["food", 350]]})
    deck = pptx_bytes([(["Roadmap"], "Say it is a draft.")])
    sent = await upload(
        served,
        "docs1",
        [
            ("budget.xlsx", sheet, "application/vnd.ms-excel"),
            ("deck.pptx", deck, "application/octet-stream"),
            ("report.pdf", pdf_bytes([["Page one"]]), "application/pdf"),
        ],
    )
    outcome = await asyncio.wait_for(served.runtime.turns.wait_turn(sent["turn"]), 30)
    assert outcome.status == "done"
    body = json.dumps(model_server.requests[-1].json, ensure_ascii=False)
    assert "[attached file inbox/budget.xlsx (XLSX, sheets: Budget); its text:]" in body
    assert "--- sheet Budget ---\\nrent\\t900\\nfood\\t350" in body
    assert "--- slide 1 ---\\nRoadmap\\n[notes]\\nSay it is a draft." in body
    assert '"filename": "report.pdf"' in body  # the PDF goes as a file part, as before
    first = (await served.runtime.sessions.messages(outcome.session))[0].message
    assert "rent" not in first.text  # the dashboard shows the user's words and the notes
    contexts = [b for b in first.blocks if isinstance(b, ContextBlock) and b.kind == "attachment"]
    assert len(contexts) == 2
    assert [b.name for b in first.blocks if isinstance(b, DocumentBlock)] == ["report.pdf"]
