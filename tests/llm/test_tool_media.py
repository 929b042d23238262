"""Tool media through the real turn loop: the image a tool attaches goes after all the tool
results of the message, in each API's own shape (the fake model server refuses any other
order), the transcript keeps it by blob reference, a model that takes no images goes on
text-only with a note, and compaction and exports show a placeholder."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from habakkuk.engine.agent.compaction import render_messages
from habakkuk.engine.llm.media import rejects_media, text_only
from habakkuk.engine.llm.provider import ProviderError
from habakkuk.engine.llm.types import (
    DocumentBlock,
    ImageBlock,
    Message,
    ModelRequest,
    TextBlock,
    ToolResultBlock,
)
from tests.conftest import REMOTE_PROVIDERS, mock_config, remote_config
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


async def one_turn(runtime: Any, text: str, session: Any = None) -> tuple[Any, Any]:
    session = session or await runtime.sessions.new_session("main")
    runtime.start_workers()
    outcome = await runtime.turns.wait_turn(await runtime.turns.submit(session.id, text))
    return session, outcome


def last_user_content(kind: str, body: dict[str, Any]) -> list[str]:
    """The shape of what follows the assistant's tool calls in a request: item kinds in
    order, as the wire shows them."""
    if kind == "anthropic":
        return [b["type"] for b in body["messages"][-1]["content"]]
    if kind == "responses":
        items = body["input"]
        first = next(i for i, item in enumerate(items) if item.get("type") == "function_call")
        shape = []
        for item in items[first:]:
            if item.get("type") == "message":
                shape += [f"{item['role']}:{c['type']}" for c in item["content"]]
            else:
                shape.append(item["type"])
        return shape
    if kind == "gemini":
        contents = body["contents"]
        first = next(
            i for i, c in enumerate(contents) if any("functionCall" in p for p in c["parts"])
        )
        return [f"{c['role']}:{next(iter(p))}" for c in contents[first:] for p in c["parts"]]
    messages = body["messages"]
    first = next(i for i, m in enumerate(messages) if m.get("tool_calls"))
    shape = []
    for message in messages[first:]:
        content = message.get("content")
        if isinstance(content, list):
            shape += [f"{message['role']}:{part['type']}" for part in content]
        else:
            shape.append(message["role"])
    return shape


EXPECTED = {
    "anthropic": ["tool_result", "tool_result", "image"],
    "responses": [
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "user:input_image",
    ],
    "openai": ["assistant", "tool", "tool", "user:image_url"],
    "litellm": ["assistant", "tool", "tool", "user:image_url"],
    "gemini": [
        "model:functionCall",
        "model:functionCall",
        "user:functionResponse",
        "user:functionResponse",
        "user:inlineData",
    ],
}


@pytest.mark.parametrize("kind", list(REMOTE_PROVIDERS))
async def test_a_tool_image_goes_after_all_tool_results_in_each_wire_shape(
    kind: str,
    runtime_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    fake_litellm: list[dict[str, Any]],
) -> None:
    monkeypatch.setenv("REMOTE_KEY", "k")
    async with FakeModelServer() as server:
        runtime = await runtime_factory(remote_config(kind, server.base_url))
        workspace = runtime.config.agent("main").workspace_path
        workspace.mkdir(parents=True, exist_ok=True)
        (workspace / "pic.png").write_bytes(png())
        server.script(
            Reply(
                tool_calls=[
                    ToolCall("view_image", {"path": "pic.png"}),
                    ToolCall("list_dir", {"path": "."}),
                ]
            ),
            Reply(text="A red rectangle."),
        )
        session, outcome = await one_turn(runtime, "what is in pic.png?")
        bodies = [r.json for r in server.requests]
        messages = await runtime.sessions.messages(session.id)
    assert outcome.reply == "A red rectangle."
    assert len(bodies) == 2  # the server accepted the shape: no 400, no retry
    assert last_user_content(kind, bodies[1]) == EXPECTED[kind]
    results = messages[2].message
    assert [b.type for b in results.blocks] == ["tool_result", "tool_result", "image"]
    image = results.blocks[2]
    assert isinstance(image, ImageBlock)
    assert Path(image.blob).read_bytes() == png()  # stored by blob reference


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_a_model_that_rejects_images_goes_on_text_only_with_a_note(
    kind: str, runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_KEY", "k")
    model = REMOTE_PROVIDERS[kind][1]
    async with FakeModelServer() as server:
        server.blind_models.add(model)
        runtime = await runtime_factory(remote_config(kind, server.base_url))
        workspace = runtime.config.agent("main").workspace_path
        workspace.mkdir(parents=True, exist_ok=True)
        (workspace / "pic.png").write_bytes(png())
        server.script(
            Reply(tool_calls=[ToolCall("view_image", {"path": "pic.png"})]),
            Reply(text="I cannot see images."),
            Reply(text="Still text-only."),
        )
        session, outcome = await one_turn(runtime, "look at pic.png")
        _, later = await one_turn(runtime, "and now?", session)
        bodies = [r.json for r in server.requests]
        messages = await runtime.sessions.messages(session.id)
    assert outcome.reply == "I cannot see images."
    assert later.reply == "Still text-only."
    # The call, the refused request with the image, the same request text-only, and the
    # next turn's request sent text-only at once (the router remembers the model).
    assert len(bodies) == 4
    for body in (bodies[2], bodies[3]):
        sent = str(body)
        assert "image_url" not in sent and "'type': 'image'" not in sent
        assert "pic.png not shown" in sent and "goes on text-only" in sent
    # The transcript keeps the image; only what is sent to this model leaves it out.
    assert any(isinstance(b, ImageBlock) for b in messages[2].message.blocks)


def test_compaction_renders_a_tool_image_as_a_placeholder() -> None:
    results = Message(
        "user",
        [
            ToolResultBlock("call_1", "pic.png: PNG image, 40 x 30 px; shown below"),
            ImageBlock("image/png", blob="/blobs/ab/abc.png", name="pic.png"),
        ],
    )
    text = render_messages([Message("user", [TextBlock("look")]), results])
    assert "Tool results:" in text
    assert "[image: pic.png]" in text
    assert "/blobs/" not in text


async def test_an_export_shows_a_tool_image_as_a_placeholder(
    runtime_factory: Any, model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_KEY", "k")
    runtime = await runtime_factory(remote_config("anthropic", model_server.base_url))
    workspace = runtime.config.agent("main").workspace_path
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "pic.png").write_bytes(png())
    model_server.script(
        Reply(tool_calls=[ToolCall("view_image", {"path": "pic.png"})]),
        Reply(text="Red."),
    )
    session, _ = await one_turn(runtime, "look at pic.png")
    markdown = await runtime.sessions.export_session(session.id, "md")
    assert "Tool result · view_image" in markdown
    assert "*[image: pic.png]*" in markdown


async def test_a_stopped_turn_keeps_the_images_of_calls_that_finished(
    runtime_factory: Any,
) -> None:
    script = """
    - tool_calls:
        - {name: exec, arguments: {command: "sleep 30"}}
        - {name: view_image, arguments: {path: pic.png}}
    - text: "never reached"
    """
    runtime = await runtime_factory(mock_config(script, mode="full"))
    workspace = runtime.config.agent("main").workspace_path
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "pic.png").write_bytes(png())
    session = await runtime.sessions.new_session("main")
    with runtime.bus.subscribe(
        lambda e: e.kind == "tool.end" and e.data["tool"] == "view_image"
    ) as ended:
        runtime.start_workers()
        turn = await runtime.turns.submit(session.id, "look, slowly")
        await asyncio.wait_for(ended.get(), 30)
    await runtime.turns.stop_turn(turn)
    outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), 30)
    assert outcome.status == "cancelled"
    stored = (await runtime.sessions.messages(session.id))[2].message
    kinds = [b.type for b in stored.blocks]
    assert kinds == ["tool_result", "tool_result", "image"]  # exec's interrupted result: none
    exec_result = stored.tool_results[0]
    assert exec_result.is_error and "stopped" in exec_result.text


@pytest.mark.parametrize(
    ("message", "refused"),
    [
        ("Invalid content type. image_url is only supported by certain models.", True),
        ("'claude-x' does not support image input.", True),
        ("messages[1]: unknown variant `image_url`, expected `text`", True),
        ("The model llama-3 is not a multimodal model", True),
        ("This model does not support PDF input", True),
        ("You uploaded an unsupported image. Please make sure your image is valid.", False),
        ("prompt is too long: 208310 tokens > 200000 maximum", False),
        ("messages.1.content.0: tool_result blocks must come first", False),
    ],
)
def test_a_refusal_of_media_is_told_from_other_bad_requests(message: str, refused: bool) -> None:
    assert rejects_media(ProviderError("bad_request", message)) is refused
    assert not rejects_media(ProviderError("server", message))  # only a bad request says so


def test_text_only_replaces_images_and_binary_documents_and_keeps_text_ones() -> None:
    message = Message(
        "user",
        [
            TextBlock("see these"),
            ImageBlock("image/png", blob="/b/1.png", name="shot.png"),
            DocumentBlock("report.pdf", "application/pdf", blob="/b/2.pdf"),
            DocumentBlock("notes.txt", "text/plain", blob="/b/3.txt"),
        ],
    )
    sent = text_only(ModelRequest("m", "", [message]), "remote/text-model")
    blocks = sent.messages[0].blocks
    assert [b.type for b in blocks] == ["text", "text", "text", "document"]
    assert "image shot.png not shown: the model remote/text-model does not accept" in str(blocks[1])
    assert "saved at /b/2.pdf" in str(blocks[2])
    assert message.blocks[1].type == "image"  # the stored message is left as it was
