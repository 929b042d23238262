"""The native Gemini adapter against fakes speaking the Gemini API's real SSE wire.

Scripted replies go through the fake model server (tests/fakes/gemini_wire.py: its
Gemini 3 requests are checked for thought signatures as the real service checks
them); the wire's rarer shapes (signed thoughts, errors inside a 200 stream, blocked
prompts) are sent verbatim by a small raw fake below.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from habakkuk.engine.config import ProviderConfig, parse_config
from habakkuk.engine.home import Home
from habakkuk.engine.llm.adapters import gemini
from habakkuk.engine.llm.factory import build_provider
from habakkuk.engine.llm.provider import Provider, ProviderError
from habakkuk.engine.llm.types import (
    DocumentBlock,
    ImageBlock,
    Message,
    ModelRequest,
    OpaqueBlock,
    StreamDone,
    StreamEvent,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)
from tests.fakes.gemini_wire import BYPASS, sse
from tests.fakes.loopback import serve_on_loopback
from tests.fakes.model_server import Drop, Fail, FakeModelServer, Reply, ToolCall

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
TOOLS = [
    ToolSpec("read_file", "Read a file", {"type": "object", "properties": {"path": {}}}),
    ToolSpec("list_dir", "List a folder", {"type": "object"}),
]
G3 = "gemini-3-flash-preview"
G25 = "gemini-2.5-flash"

_made: list[Any] = []


@pytest.fixture(autouse=True)
async def _close_providers() -> AsyncIterator[None]:
    yield
    while _made:
        await _made.pop().aclose()


def make(base_url: str, name: str = "gem") -> Provider:
    config = ProviderConfig(type="gemini", base_url=base_url)
    config.name = name
    provider = gemini.create(config)
    _made.append(provider)
    return provider


def request(*messages: Message, model: str = G3, **kwargs: Any) -> ModelRequest:
    kwargs.setdefault("api_key", "AIza-test")
    return ModelRequest(
        model=model,
        system="You are terse.",
        messages=list(messages) or [Message.user_text("hi")],
        **kwargs,
    )


async def collect(provider: Provider, req: ModelRequest) -> tuple[list[StreamEvent], StreamDone]:
    events = [event async for event in provider.stream(req)]
    done = events[-1]
    assert isinstance(done, StreamDone)
    return events[:-1], done


class RawGemini:
    """A fake Gemini endpoint that sends each scripted answer as it is: a list of
    GenerateContentResponse objects (one `data:` event each), or (status, error body)."""

    def __init__(self) -> None:
        self.answers: list[list[dict[str, Any]] | tuple[int, dict[str, Any]]] = []
        self.bodies: list[Any] = []
        self.paths: list[str] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> RawGemini:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1beta/models/{target}", self.handle)
        self.runner, port = await serve_on_loopback(app)
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.bodies.append(await request.json())
        self.paths.append(request.path_qs)
        answer = self.answers.pop(0)
        if isinstance(answer, tuple):
            return web.json_response(answer[1], status=answer[0])
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in answer:
            await response.write(sse(event))
        await response.write_eof()
        return response


def chunk(*parts: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": list(parts), "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": G3, **extra}


# -- the request ----------------------------------------------------------------------------


async def test_the_request_goes_to_the_versioned_stream_url_with_the_key_header(
    model_server: FakeModelServer,
) -> None:
    model_server.script(Reply(text="ok"))
    await collect(make(model_server.base_url), request(model=f"models/{G3}"))
    sent = model_server.requests[-1]
    assert sent.path == f"/v1beta/models/{G3}:streamGenerateContent"
    assert sent.headers["x-goog-api-key"] == "AIza-test"
    assert "authorization" not in sent.headers and "key=" not in sent.path


async def test_a_base_url_that_names_the_version_is_used_as_it_is(
    model_server: FakeModelServer,
) -> None:
    model_server.script(Reply(text="ok"))
    await collect(make(f"{model_server.base_url}/v1beta/"), request())
    assert model_server.requests[-1].path == f"/v1beta/models/{G3}:streamGenerateContent"


async def test_system_persona_tools_and_limits_are_sent_in_gemini_shapes(
    model_server: FakeModelServer,
) -> None:
    model_server.script(Reply(text="ok"))
    req = request(tools=TOOLS, persona="Speak like a pirate.", max_tokens=1234)
    await collect(make(model_server.base_url), req)
    body = model_server.requests[-1].json
    assert body["systemInstruction"] == {
        "parts": [{"text": "You are terse.\n\nSpeak like a pirate."}]
    }
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "read_file",
                    "description": "Read a file",
                    "parametersJsonSchema": TOOLS[0].input_schema,
                },
                {
                    "name": "list_dir",
                    "description": "List a folder",
                    "parametersJsonSchema": {"type": "object"},
                },
            ]
        }
    ]
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert body["generationConfig"]["maxOutputTokens"] == 1234


@pytest.mark.parametrize(
    ("model", "level", "expected"),
    [
        (G25, "off", {"thinkingBudget": 0}),
        (G25, "low", {"thinkingBudget": 2048, "includeThoughts": True}),
        (G25, "high", {"thinkingBudget": 24576, "includeThoughts": True}),
        ("gemini-2.5-pro", "off", None),  # 2.5 Pro cannot stop thinking
        ("gemini-2.5-pro", "medium", {"thinkingBudget": 8192, "includeThoughts": True}),
        ("gemini-2.0-flash", "high", None),  # 2.0 does not think
        (G3, "off", {"thinkingLevel": "minimal"}),
        (G3, "medium", {"thinkingLevel": "medium", "includeThoughts": True}),
        ("gemini-3-pro-preview", "off", {"thinkingLevel": "low"}),
        ("gemini-3-pro-preview", "medium", {"thinkingLevel": "high", "includeThoughts": True}),
        ("gemini-3.1-pro-preview", "medium", {"thinkingLevel": "medium", "includeThoughts": True}),
        ("gemini-flash-latest", "low", {"thinkingBudget": 2048, "includeThoughts": True}),
        ("gemini-flash-latest", "off", None),
        ("gemma-3-27b-it", "high", None),
    ],
)
async def test_thinking_is_a_budget_on_2_5_and_a_level_on_3(
    model: str, level: str, expected: dict[str, Any] | None, model_server: FakeModelServer
) -> None:
    model_server.script(Reply(text="ok"))
    await collect(make(model_server.base_url), request(model=model, thinking=level))
    config = model_server.requests[-1].json["generationConfig"]
    assert config.get("thinkingConfig") == expected


async def test_a_budget_past_max_tokens_leaves_room_for_the_answer(
    model_server: FakeModelServer,
) -> None:
    model_server.script(Reply(text="ok"))
    await collect(make(model_server.base_url), request(model=G25, thinking="high", max_tokens=4096))
    assert model_server.requests[-1].json["generationConfig"]["maxOutputTokens"] == 24576 + 4096


async def test_images_and_documents_go_in_as_inline_data(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    image, pdf, notes = tmp_path / "a.png", tmp_path / "b.pdf", tmp_path / "c.md"
    image.write_bytes(PNG)
    pdf.write_bytes(b"%PDF-1.4 fake")
    notes.write_text("# Notes\nbuy milk", encoding="utf-8")
    message = Message(
        "user",
        [
            TextBlock("look"),
            ImageBlock("image/png", blob=str(image)),
            DocumentBlock("b.pdf", "application/pdf", blob=str(pdf)),
            DocumentBlock("c.md", "text/markdown", blob=str(notes)),
        ],
    )
    model_server.script(Reply(text="ok"))
    await collect(make(model_server.base_url), request(message))
    (content,) = model_server.requests[-1].json["contents"]
    assert content["parts"] == [
        {"text": "look"},
        {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(PNG).decode()}},
        {"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0xLjQgZmFrZQ=="}},
        {"text": "[c.md]\n# Notes\nbuy milk"},
    ]


# -- streaming --------------------------------------------------------------------------------


async def test_text_streams_piece_by_piece_with_usage(model_server: FakeModelServer) -> None:
    model_server.script(
        Reply(
            text="The answer is forty-two.",
            chunk_size=5,
            input_tokens=120,
            cache_read_tokens=1000,
            output_tokens=33,
        )
    )
    deltas, done = await collect(make(model_server.base_url), request())
    assert [d.text for d in deltas if isinstance(d, TextDelta)] == [
        "The a",
        "nswer",
        " is f",
        "orty-",
        "two.",
    ]
    assert done.message.text == "The answer is forty-two."
    assert done.stop_reason == "end_turn"
    assert done.usage == Usage(input_tokens=120, output_tokens=33, cache_read_tokens=1000)


async def test_tool_calls_stream_start_then_arguments_and_keep_their_signature(
    model_server: FakeModelServer,
) -> None:
    model_server.script(
        Reply(
            text="Looking.",
            tool_calls=[ToolCall("read_file", {"path": "a.txt"}), ToolCall("list_dir", {})],
        )
    )
    deltas, done = await collect(make(model_server.base_url), request(tools=TOOLS))
    starts = [d for d in deltas if isinstance(d, ToolCallStart)]
    assert [s.tool for s in starts] == ["read_file", "list_dir"]
    pieces = [d for d in deltas if isinstance(d, ToolCallDelta)]
    assert json.loads(pieces[0].arguments) == {"path": "a.txt"}
    assert pieces[0].tool_use_id == starts[0].tool_use_id
    assert done.stop_reason == "tool_use"
    first, second = done.message.tool_uses
    assert (first.tool, first.input) == ("read_file", {"path": "a.txt"})
    assert first.signature in model_server.gemini_signatures
    assert second.signature == ""  # parallel calls: only the first is signed
    assert len({first.tool_use_id, second.tool_use_id}) == 2


async def test_signatures_are_replayed_exactly_and_results_answer_by_name(
    model_server: FakeModelServer,
) -> None:
    provider = make(model_server.base_url)
    model_server.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "a"}), ToolCall("list_dir", {})]),
        Reply(text="Done."),
        Reply(text="Sure."),
    )
    history = [Message.user_text("go")]
    _, first = await collect(provider, request(*history, tools=TOOLS))
    calls = first.message.tool_uses
    history += [
        first.message,
        Message(
            "user",
            [
                ToolResultBlock(calls[0].tool_use_id, "alpha"),
                ToolResultBlock(calls[1].tool_use_id, "nope", is_error=True),
            ],
        ),
    ]
    _, second = await collect(provider, request(*history, tools=TOOLS))
    assert second.message.text == "Done."  # the fake checks Gemini 3's signatures
    model_turn, answers = model_server.requests[1].json["contents"][1:]
    assert model_turn == {
        "role": "model",
        "parts": [
            {
                "functionCall": {"name": "read_file", "args": {"path": "a"}},
                "thoughtSignature": calls[0].signature,
            },
            {"functionCall": {"name": "list_dir", "args": {}}},
        ],
    }
    assert answers == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "read_file", "response": {"output": "alpha"}}},
            {"functionResponse": {"name": "list_dir", "response": {"error": "nope"}}},
        ],
    }
    # A text reply's signature (on the stream's last, empty part) is kept on its text.
    (text,) = second.message.blocks
    assert isinstance(text, TextBlock) and text.signature in model_server.gemini_signatures
    history += [second.message, Message.user_text("thanks")]
    await collect(provider, request(*history, tools=TOOLS))
    replayed = model_server.requests[2].json["contents"][3]
    assert replayed == {
        "role": "model",
        "parts": [{"text": "Done.", "thoughtSignature": text.signature}],
    }


async def test_calls_another_model_wrote_carry_the_bypass_value_on_gemini_3(
    model_server: FakeModelServer,
) -> None:
    history = [
        Message.user_text("go"),
        Message(
            "assistant",
            [
                ThinkingBlock("hm", signature="sig-ant", provider="anthropic"),
                ToolUseBlock("toolu_1", "read_file", {"path": "x"}),
            ],
        ),
        Message("user", [ToolResultBlock("toolu_1", "")]),
    ]
    model_server.script(Reply(text="ok"), Reply(text="ok"))
    provider = make(model_server.base_url)
    _, done = await collect(provider, request(*history, tools=TOOLS))
    assert done.message.text == "ok"  # a Gemini 3 model took the unsigned call
    model_turn = model_server.requests[0].json["contents"][1]
    assert model_turn["parts"] == [
        {"functionCall": {"name": "read_file", "args": {"path": "x"}}, "thoughtSignature": BYPASS}
    ]
    assert model_server.requests[0].json["contents"][2]["parts"] == [
        {"functionResponse": {"name": "read_file", "response": {"output": "(no output)"}}}
    ]
    await collect(provider, request(*history, tools=TOOLS, model=G25))
    older = model_server.requests[1].json["contents"][1]["parts"][0]
    assert "thoughtSignature" not in older  # 2.5 validates nothing: sent as written


async def test_the_fake_refuses_an_unsigned_gemini_3_call_as_the_service_does(
    model_server: FakeModelServer,
) -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {}}}]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "read_file", "response": {}}}],
            },
        ]
    }
    url = f"{model_server.base_url}/v1beta/models/{G3}:streamGenerateContent?alt=sse"
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as reply:
        assert reply.status == 400
        error = (await reply.json())["error"]
    assert "missing a thought_signature" in error["message"]


async def test_thoughts_stream_as_thinking_and_signed_ones_are_replayed() -> None:
    async with RawGemini() as raw:
        raw.answers.append(
            [
                chunk({"text": "Let me ", "thought": True}),
                chunk({"text": "think.", "thought": True, "thoughtSignature": "T-SIG"}),
                chunk({"text": "Checking."}),
                chunk(
                    {
                        "functionCall": {"name": "read_file", "args": {"path": "a"}},
                        "thoughtSignature": "F-SIG",
                    },
                    finish="STOP",
                    usageMetadata={
                        "promptTokenCount": 50,
                        "candidatesTokenCount": 10,
                        "thoughtsTokenCount": 40,
                        "toolUsePromptTokenCount": 5,
                    },
                ),
            ]
        )
        raw.answers.append([chunk({"text": "ok"}, finish="STOP")])
        provider = make(raw.url)
        deltas, done = await collect(provider, request(tools=TOOLS, thinking="high"))
        assert [d.text for d in deltas if isinstance(d, ThinkingDelta)] == ["Let me ", "think."]
        thought, text, call = done.message.blocks
        assert thought == ThinkingBlock("Let me think.", signature="T-SIG", provider="gemini")
        assert text == TextBlock("Checking.")
        assert isinstance(call, ToolUseBlock) and call.signature == "F-SIG"
        assert done.usage == Usage(input_tokens=55, output_tokens=50)
        unsigned = ThinkingBlock("musing", provider="gemini")
        reply = Message("assistant", [unsigned, *done.message.blocks])
        results = Message("user", [ToolResultBlock(call.tool_use_id, "text")])
        await collect(provider, request(Message.user_text("hi"), reply, results, tools=TOOLS))
    assert raw.bodies[1]["contents"][1]["parts"] == [
        {"text": "Let me think.", "thought": True, "thoughtSignature": "T-SIG"},
        {"text": "Checking."},
        {"functionCall": {"name": "read_file", "args": {"path": "a"}}, "thoughtSignature": "F-SIG"},
    ]


async def test_a_part_we_do_not_read_is_kept_whole_and_replayed_as_it_came() -> None:
    # An image the model drew: one event of megabytes, past any line-reader's limit.
    drawn = {"inlineData": {"mimeType": "image/png", "data": "A" * 3_000_000}}
    async with RawGemini() as raw:
        raw.answers.append([chunk({"text": "Here."}), chunk(drawn, finish="STOP")])
        raw.answers.append([chunk({"text": "ok"}, finish="STOP")])
        provider = make(raw.url)
        _, done = await collect(provider, request())
        assert done.message.blocks[1] == OpaqueBlock("gemini", drawn)
        await collect(provider, request(Message.user_text("hi"), done.message))
    assert raw.bodies[1]["contents"][1]["parts"] == [{"text": "Here."}, drawn]


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("MAX_TOKENS", "max_tokens"),
        ("SAFETY", "refusal"),
        ("RECITATION", "refusal"),
        ("OTHER", "other"),
    ],
)
async def test_finish_reasons_map_to_stop_reasons(finish: str, stop: str) -> None:
    async with RawGemini() as raw:
        raw.answers.append([chunk({"text": "Partial"}, finish=finish)])
        _, done = await collect(make(raw.url), request())
    assert (done.stop_reason, done.message.text) == (stop, "Partial")


async def test_a_blocked_prompt_ends_as_a_refusal() -> None:
    async with RawGemini() as raw:
        raw.answers.append(
            [
                {
                    "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
                    "usageMetadata": {"promptTokenCount": 7},
                }
            ]
        )
        _, done = await collect(make(raw.url), request())
    assert done.stop_reason == "refusal"
    assert done.message.blocks == []
    assert done.usage.input_tokens == 7


async def test_a_stream_without_a_finish_reason_was_cut() -> None:
    async with RawGemini() as raw:
        raw.answers.append([chunk({"text": "Hal"})])
        with pytest.raises(ProviderError) as caught:
            await collect(make(raw.url), request())
    assert caught.value.error_class == "network"


async def test_a_dropped_connection_mid_stream_is_a_network_error_after_the_deltas(
    model_server: FakeModelServer,
) -> None:
    model_server.script(Drop(Reply(text="abcdefghijklmnop", chunk_size=3), after_chunks=2))
    got: list[StreamEvent] = []
    with pytest.raises(ProviderError) as caught:
        async for event in make(model_server.base_url).stream(request()):
            got.append(event)
    assert caught.value.error_class == "network"
    assert [e.text for e in got if isinstance(e, TextDelta)] == ["abc", "def"]


# -- errors -----------------------------------------------------------------------------------

ERRORS = [
    (Fail(429, retry_after=41), "rate_limit", 41.0),
    (Fail(429), "rate_limit", None),
    (Fail(429, "billing"), "billing", None),
    (Fail(503, retry_after=2), "overloaded", 2.0),
    (Fail(500), "server", None),
    (Fail(504), "server", None),
    (Fail(400, "auth"), "auth", None),
    (Fail(401), "auth", None),
    (Fail(403, "auth"), "auth", None),
    (Fail(400, "billing"), "billing", None),
    (Fail(400, "context_overflow"), "context_overflow", None),
    (Fail(400), "bad_request", None),
    (Fail(404), "bad_request", None),
]


@pytest.mark.parametrize(("fail", "error_class", "retry_after"), ERRORS)
async def test_http_errors_map_to_the_routers_classes(
    fail: Fail, error_class: str, retry_after: float | None, model_server: FakeModelServer
) -> None:
    model_server.script(fail)
    with pytest.raises(ProviderError) as caught:
        await collect(make(model_server.base_url, "gem"), request())
    assert caught.value.error_class == error_class
    assert caught.value.status == fail.status
    assert caught.value.retry_after == retry_after
    assert caught.value.provider == "gem"


@pytest.mark.parametrize(
    ("error", "error_class", "retry_after"),
    [
        (
            {
                "code": 429,
                "status": "RESOURCE_EXHAUSTED",
                "message": "Resource has been exhausted (e.g. check quota).",
                "details": [
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}
                ],
            },
            "rate_limit",
            7.0,
        ),
        (
            {"code": 503, "status": "UNAVAILABLE", "message": "The model is overloaded."},
            "overloaded",
            None,
        ),
        (
            {"code": 500, "status": "INTERNAL", "message": "An internal error has occurred."},
            "server",
            None,
        ),
        (
            {
                "code": 400,
                "status": "INVALID_ARGUMENT",
                "message": "The input token count (2000000) exceeds the maximum number of "
                "tokens allowed (1048576).",
            },
            "context_overflow",
            None,
        ),
    ],
)
async def test_an_error_inside_the_stream_maps_like_an_http_one(
    error: dict[str, Any], error_class: str, retry_after: float | None
) -> None:
    async with RawGemini() as raw:
        raw.answers.append([chunk({"text": "Hel"}), {"error": error}])
        got: list[StreamEvent] = []
        with pytest.raises(ProviderError) as caught:
            async for event in make(raw.url).stream(request()):
                got.append(event)
    assert [e.text for e in got if isinstance(e, TextDelta)] == ["Hel"]
    assert caught.value.error_class == error_class
    assert caught.value.retry_after == retry_after


async def test_a_non_json_error_page_is_classified_by_its_status() -> None:
    async with RawGemini() as raw:
        raw.answers.append((502, {"unexpected": "gateway page"}))
        with pytest.raises(ProviderError) as caught:
            await collect(make(raw.url), request())
    assert (caught.value.error_class, caught.value.status) == ("server", 502)


async def test_missing_key_is_an_auth_error_before_any_request() -> None:
    # Google's own address: no request may leave without a key (a loopback server
    # would be a local one, which may take none).
    with pytest.raises(ProviderError) as caught:
        await collect(make(gemini.DEFAULT_BASE_URL), request(api_key=None))
    assert caught.value.error_class == "auth"
    assert "providers.gem.key_env" in str(caught.value)


async def test_an_unreachable_server_is_a_network_error() -> None:
    async with FakeModelServer() as gone:
        url = gone.base_url
    with pytest.raises(ProviderError) as caught:
        await collect(make(url), request())
    assert caught.value.error_class == "network"


# -- registration -----------------------------------------------------------------------------


def test_the_gemini_preset_is_the_native_adapter(home: Home) -> None:
    text = "providers:\n  gemini: {}\nagents:\n  main:\n    model: gemini/gemini-2.5-flash\n"
    config = parse_config(text, home.config_path, home)
    provider = config.providers["gemini"]
    assert (provider.type, provider.key_vars, provider.base_url) == (
        "gemini",
        ["GEMINI_API_KEY"],
        None,
    )
    built = build_provider(provider, home.root)
    _made.append(built)
    assert isinstance(built, gemini.GeminiProvider)


def test_importing_the_adapter_loads_no_http_library() -> None:
    code = "import sys, habakkuk.engine.llm.adapters.gemini; print('aiohttp' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"
