"""The native Bedrock adapter against a fake Bedrock runtime speaking the real wire:
SigV4 (recomputed by the fake) or a bearer API key in, the AWS event-stream framing out."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.config import ProviderConfig
from habakkuk.engine.llm.adapters.bedrock import create
from habakkuk.engine.llm.adapters.bedrock_auth import endpoint, stream_url
from habakkuk.engine.llm.provider import Provider, ProviderError
from habakkuk.engine.llm.types import (
    DocumentBlock,
    ImageBlock,
    Message,
    ModelRequest,
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
)
from tests.fakes.bedrock_runtime import (
    Corrupt,
    FakeBedrockRuntime,
    HttpFail,
    Reply,
    StreamFail,
    ToolCall,
)
from tests.helpers import python_in

ACCESS_KEY, SECRET = "AKIDBEDROCKTEST", "bedrock-test-secret"
CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
TOOLS = [
    ToolSpec("read_file", "Read a file", {"type": "object", "properties": {"path": {}}}),
    ToolSpec("write_file", "Write a file", {"type": "object"}),
]
AWS_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No AWS settings of the machine running the tests: no files, no metadata service;
    the test credentials in the environment."""
    for variable in AWS_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    return monkeypatch


@pytest.fixture
async def fake(aws: pytest.MonkeyPatch) -> AsyncIterator[FakeBedrockRuntime]:
    async with FakeBedrockRuntime() as server:
        server.credentials[ACCESS_KEY] = (SECRET, None)
        yield server


_made: list[Any] = []


@pytest.fixture(autouse=True)
async def _close_providers() -> AsyncIterator[None]:
    yield
    while _made:
        await _made.pop().aclose()


def make(fake: FakeBedrockRuntime, region: str | None = "us-west-2") -> Provider:
    config = ProviderConfig(type="bedrock", base_url=fake.base_url, region=region)
    config.name = "bedrock"
    provider = create(config)
    _made.append(provider)
    return provider


async def collect(provider: Provider, request: ModelRequest) -> list[StreamEvent]:
    return [event async for event in provider.stream(request)]


def request(model: str = CLAUDE, **kwargs: Any) -> ModelRequest:
    kwargs.setdefault("messages", [Message.user_text("hi")])
    return ModelRequest(model=model, system=kwargs.pop("system", "You help."), **kwargs)


# -- text, auth --------------------------------------------------------------------------


async def test_a_text_reply_streams_through_sigv4_signed_requests(
    fake: FakeBedrockRuntime,
) -> None:
    fake.script(Reply(text="Hello there, world.", input_tokens=12, output_tokens=4, split=7))
    events = await collect(make(fake), request(max_tokens=300))
    deltas = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert deltas == "Hello there, world."
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.message.text == "Hello there, world."
    assert done.stop_reason == "end_turn"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (12, 4)
    (seen,) = fake.requests
    assert seen.auth == "sigv4"
    assert (seen.access_key, seen.region, seen.service) == (ACCESS_KEY, "us-west-2", "bedrock")
    assert {"host", "x-amz-date", "content-type"} <= set(seen.signed_headers)
    assert seen.model == CLAUDE  # sent percent-encoded, signed as AWS canonicalises it
    assert seen.body["messages"] == [
        {"role": "user", "content": [{"text": "hi"}, {"cachePoint": {"type": "default"}}]}
    ]
    assert seen.body["inferenceConfig"] == {"maxTokens": 300}
    assert seen.headers["accept"] == "application/vnd.amazon.eventstream"


async def test_a_session_token_is_sent_and_signed(
    fake: FakeBedrockRuntime, aws: pytest.MonkeyPatch
) -> None:
    aws.setenv("AWS_SESSION_TOKEN", "session-token-1")
    fake.credentials[ACCESS_KEY] = (SECRET, "session-token-1")
    fake.script(Reply(text="ok"))
    events = await collect(make(fake), request())
    assert isinstance(events[-1], StreamDone)
    assert "x-amz-security-token" in fake.requests[0].signed_headers


async def test_a_wrong_secret_is_refused_as_an_auth_error(
    fake: FakeBedrockRuntime, aws: pytest.MonkeyPatch
) -> None:
    aws.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(ProviderError) as caught:
        await collect(make(fake), request())
    assert caught.value.error_class == "auth"
    assert caught.value.status == 403
    assert "InvalidSignatureException" in str(caught.value)


async def test_a_bedrock_api_key_goes_as_a_bearer_token_unsigned(
    fake: FakeBedrockRuntime,
) -> None:
    fake.bearer_tokens.add("bedrock-api-key-1")
    fake.script(Reply(text="ok"))
    events = await collect(make(fake), request(api_key="bedrock-api-key-1"))
    assert isinstance(events[-1], StreamDone)
    (seen,) = fake.requests
    assert (seen.auth, seen.bearer) == ("bearer", "bedrock-api-key-1")
    assert "x-amz-date" not in seen.headers


async def test_the_bearer_variable_is_used_when_the_provider_has_no_key(
    fake: FakeBedrockRuntime, aws: pytest.MonkeyPatch
) -> None:
    aws.setenv("AWS_BEARER_TOKEN_BEDROCK", "from-the-environment")
    fake.bearer_tokens.add("from-the-environment")
    fake.script(Reply(text="ok"))
    await collect(make(fake), request())
    assert fake.requests[0].bearer == "from-the-environment"


async def test_a_refused_api_key_is_an_auth_error(fake: FakeBedrockRuntime) -> None:
    with pytest.raises(ProviderError) as caught:
        await collect(make(fake), request(api_key="wrong"))
    assert caught.value.error_class == "auth"


async def test_no_credentials_anywhere_is_an_auth_error_saying_where_they_are_looked_for(
    fake: FakeBedrockRuntime, aws: pytest.MonkeyPatch
) -> None:
    aws.delenv("AWS_ACCESS_KEY_ID")
    aws.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ProviderError) as caught:
        await collect(make(fake), request())
    assert caught.value.error_class == "auth"
    assert "AWS_BEARER_TOKEN_BEDROCK" in str(caught.value)
    assert fake.requests == []


async def test_the_region_comes_from_the_environment_when_the_provider_names_none(
    fake: FakeBedrockRuntime, aws: pytest.MonkeyPatch
) -> None:
    aws.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    fake.script(Reply(text="ok"))
    await collect(make(fake, region=None), request())
    assert fake.requests[0].region == "eu-central-1"


async def test_no_region_anywhere_says_how_to_set_one(fake: FakeBedrockRuntime) -> None:
    with pytest.raises(ProviderError) as caught:
        await collect(make(fake, region=None), request())
    assert caught.value.error_class == "bad_request"
    assert "providers.bedrock.region" in str(caught.value)


def test_the_public_endpoint_is_the_regions_and_the_model_id_is_one_path_segment() -> None:
    root = endpoint(None, "ap-southeast-2")
    assert root == "https://bedrock-runtime.ap-southeast-2.amazonaws.com"
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-pro-v1:0"
    assert stream_url(root, arn) == (
        f"{root}/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile"
        "%2Fus.amazon.nova-pro-v1%3A0/converse-stream"
    )


CREDENTIAL_PROCESS = """
import json, sys, datetime, pathlib
counter = pathlib.Path(sys.argv[1])
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
minutes = int(sys.argv[2])
expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=minutes)
print(json.dumps({"Version": 1, "AccessKeyId": f"AKIDPROCESS{n}", "SecretAccessKey": "s",
                  "SessionToken": f"token{n}", "Expiration": expires.isoformat()}))
"""


@pytest.mark.parametrize(("minutes", "keys"), [(60, ["AKIDPROCESS1"] * 2), (12, None)])
async def test_profile_credentials_are_kept_and_refreshed_before_they_expire(
    fake: FakeBedrockRuntime,
    aws: pytest.MonkeyPatch,
    tmp_path: Path,
    minutes: int,
    keys: list[str] | None,
) -> None:
    script, counter = tmp_path / "creds.py", tmp_path / "count"
    script.write_text(CREDENTIAL_PROCESS)
    config = tmp_path / "aws-config"
    config.write_text(
        f"[profile work]\ncredential_process = {sys.executable} {script} {counter} {minutes}\n"
    )
    aws.setenv("AWS_CONFIG_FILE", str(config))
    aws.setenv("AWS_PROFILE", "work")
    aws.delenv("AWS_ACCESS_KEY_ID")
    aws.delenv("AWS_SECRET_ACCESS_KEY")
    for n in range(1, 5):
        fake.credentials[f"AKIDPROCESS{n}"] = ("s", f"token{n}")
    fake.script(Reply(text="one"), Reply(text="two"))
    provider = make(fake)
    await collect(provider, request())
    await collect(provider, request())
    used = [r.access_key for r in fake.requests]
    if keys is not None:  # an hour left: resolved once, then kept
        assert used == keys
        assert counter.read_text() == "1"
    else:  # inside botocore's 15-minute window: each call refreshes first
        assert used[0] != used[1]
        assert int(counter.read_text()) >= 3


# -- tools, thinking, usage, cache points -------------------------------------------------


async def test_a_tool_call_streams_and_its_result_goes_back(fake: FakeBedrockRuntime) -> None:
    fake.script(
        Reply(text="Looking.", tool_calls=[ToolCall("read_file", {"path": "a.txt"}, "tu-1")]),
        Reply(text="It says hi."),
    )
    provider = make(fake)
    events = await collect(provider, request(tools=TOOLS))
    assert ToolCallStart("tu-1", "read_file") in events
    fragments = "".join(e.arguments for e in events if isinstance(e, ToolCallDelta))
    assert json.loads(fragments) == {"path": "a.txt"}
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.stop_reason == "tool_use"
    assert done.message.tool_uses == [ToolUseBlock("tu-1", "read_file", {"path": "a.txt"})]
    tools = fake.requests[0].body["toolConfig"]["tools"]
    assert tools[0] == {
        "toolSpec": {
            "name": "read_file",
            "description": "Read a file",
            "inputSchema": {"json": TOOLS[0].input_schema},
        }
    }

    history = [
        Message.user_text("read a.txt"),
        done.message,
        Message("user", [ToolResultBlock("tu-1", "hi"), ToolResultBlock("tu-2", "", True)]),
    ]
    await collect(provider, request(tools=TOOLS, messages=history))
    sent = fake.requests[1].body["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [
            {"text": "Looking."},
            {"toolUse": {"toolUseId": "tu-1", "name": "read_file", "input": {"path": "a.txt"}}},
        ],
    }
    assert sent[2]["content"][:2] == [
        {"toolResult": {"toolUseId": "tu-1", "content": [{"text": "hi"}], "status": "success"}},
        {
            "toolResult": {
                "toolUseId": "tu-2",
                "content": [{"text": "(no output)"}],
                "status": "error",
            }
        },
    ]


async def test_tool_blocks_go_as_text_when_the_request_offers_no_tools(
    fake: FakeBedrockRuntime,
) -> None:
    fake.script(Reply(text="Summary."))
    history = [
        Message.user_text("read it"),
        Message("assistant", [ToolUseBlock("tu-1", "read_file", {"path": "a"})]),
        Message("user", [ToolResultBlock("tu-1", "contents")]),
    ]
    await collect(make(fake), request(messages=history))
    body = fake.requests[0].body
    assert "toolConfig" not in body
    texts = [b.get("text", "") for m in body["messages"] for b in m["content"]]
    assert '[called read_file with {"path": "a"}]' in texts
    assert "[the tool returned: contents]" in texts


async def test_thinking_is_asked_of_claude_and_its_signed_reasoning_replayed(
    fake: FakeBedrockRuntime,
) -> None:
    fake.script(Reply(text="42.", thinking="Let me think.", signature="sig-9"), Reply(text="ok"))
    provider = make(fake)
    events = await collect(provider, request(thinking="medium", max_tokens=1000))
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "Let me think."
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.message.blocks[0] == ThinkingBlock(
        "Let me think.", signature="sig-9", provider="bedrock"
    )
    body = fake.requests[0].body
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 8192}
    }
    assert body["inferenceConfig"]["maxTokens"] > 8192

    await collect(provider, request(messages=[Message.user_text("q"), done.message]))
    replayed = fake.requests[1].body["messages"][1]["content"][0]
    assert replayed == {
        "reasoningContent": {"reasoningText": {"text": "Let me think.", "signature": "sig-9"}}
    }


async def test_a_model_without_thinking_is_not_asked_to_think(fake: FakeBedrockRuntime) -> None:
    fake.script(Reply(text="ok"))
    await collect(make(fake), request("meta.llama3-3-70b-instruct-v1:0", thinking="high"))
    assert "additionalModelRequestFields" not in fake.requests[0].body


async def test_usage_reports_cache_reads_and_writes(fake: FakeBedrockRuntime) -> None:
    fake.script(
        Reply(
            text="ok", input_tokens=7, output_tokens=3, cache_read_tokens=900, cache_write_tokens=50
        )
    )
    done = (await collect(make(fake), request()))[-1]
    assert isinstance(done, StreamDone)
    usage = done.usage
    assert (usage.input_tokens, usage.output_tokens) == (7, 3)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (900, 50)


CACHE_POINT = {"cachePoint": {"type": "default"}}


@pytest.mark.parametrize(
    ("model", "where"),
    [
        (CLAUDE, {"system", "tools", "messages"}),
        ("anthropic.claude-3-5-haiku-20241022-v1:0", {"system", "tools", "messages"}),
        ("eu.amazon.nova-pro-v1:0", {"system", "messages"}),
        (
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile/"
            "us.anthropic.claude-opus-4-1-20250805-v1:0",
            {"system", "tools", "messages"},
        ),
        ("meta.llama3-3-70b-instruct-v1:0", set()),
        ("mistral.mistral-large-2407-v1:0", set()),
        ("anthropic.claude-3-haiku-20240307-v1:0", set()),
    ],
)
async def test_cache_points_go_only_where_the_model_takes_them(
    fake: FakeBedrockRuntime, model: str, where: set[str]
) -> None:
    fake.script(Reply(text="ok"))
    history = [Message.user_text("one"), Message("assistant", [TextBlock("two")])]
    history.append(Message.user_text("three"))
    await collect(make(fake), request(model, tools=TOOLS, messages=history, persona="Be terse."))
    (seen,) = fake.requests
    assert seen.model == model
    body = seen.body
    found = set()
    if CACHE_POINT in body["system"]:
        found.add("system")
        # the persona follows the frozen prompt's cache point
        assert body["system"] == [{"text": "You help."}, CACHE_POINT, {"text": "Be terse."}]
    if CACHE_POINT in body["toolConfig"]["tools"]:
        found.add("tools")
        assert body["toolConfig"]["tools"][-1] == CACHE_POINT
    users = [m for m in body["messages"] if m["role"] == "user"]
    if any(CACHE_POINT in m["content"] for m in users):
        found.add("messages")
        assert all(m["content"][-1] == CACHE_POINT for m in users)  # the last two user turns
    assert found == where
    status = [
        b["toolResult"].get("status") for m in users for b in m["content"] if "toolResult" in b
    ]
    assert status == []


async def test_images_and_documents_go_as_base64_bytes(
    fake: FakeBedrockRuntime, tmp_path: Path
) -> None:
    png, pdf = tmp_path / "cat.png", tmp_path / "report.pdf"
    png.write_bytes(b"\x89PNG fake image bytes")
    pdf.write_bytes(b"%PDF-1.4 fake")
    fake.script(Reply(text="A cat and a report."))
    message = Message(
        "user",
        [
            ImageBlock("image/png", str(png), "cat.png"),
            DocumentBlock("Q3 report: final!.pdf", "application/pdf", str(pdf)),
            TextBlock("what are these?"),
        ],
    )
    await collect(make(fake), request(messages=[message]))
    content = fake.requests[0].body["messages"][0]["content"]
    assert content[0] == {
        "image": {"format": "png", "source": {"bytes": "iVBORyBmYWtlIGltYWdlIGJ5dGVz"}}
    }
    assert content[1] == {
        "document": {
            "format": "pdf",
            "name": "Q3 report final",
            "source": {"bytes": "JVBERi0xLjQgZmFrZQ=="},
        }
    }
    assert content[2] == {"text": "what are these?"}


async def test_a_lone_document_gets_a_text_block_and_an_odd_image_a_note(
    fake: FakeBedrockRuntime, tmp_path: Path
) -> None:
    bmp, csv = tmp_path / "a.bmp", tmp_path / "data.csv"
    bmp.write_bytes(b"BM")
    csv.write_bytes(b"a,b\n1,2\n")
    fake.script(Reply(text="ok"))
    history = [
        Message("user", [ImageBlock("image/bmp", str(bmp))]),
        Message("assistant", [TextBlock("A bitmap.")]),
        Message("user", [DocumentBlock("data.csv", "text/csv", str(csv))]),
    ]
    await collect(make(fake), request("meta.llama3-3-70b-instruct-v1:0", messages=history))
    first, _, last = fake.requests[0].body["messages"]
    assert "image/bmp" in first["content"][0]["text"]
    document, text = last["content"]
    assert (document["document"]["format"], document["document"]["name"]) == ("csv", "data")
    assert text == {"text": "(see the attached document)"}


def test_warming_resolves_the_credentials_ahead_and_says_when_there_are_none(
    aws: pytest.MonkeyPatch,
) -> None:
    from habakkuk.engine.llm.adapters.bedrock import BedrockProvider

    provider = BedrockProvider(ProviderConfig(type="bedrock", region="us-east-1"))
    provider.warm(None)  # found in the environment: no error
    provider.warm("a-bedrock-key")  # a key needs no credentials
    aws.delenv("AWS_ACCESS_KEY_ID")
    with pytest.raises(ProviderError) as caught:
        BedrockProvider(ProviderConfig(type="bedrock", region="us-east-1")).warm(None)
    assert caught.value.error_class == "auth"


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fail", "error_class"),
    [
        (HttpFail(429, "ThrottlingException", "Too many requests, please wait."), "rate_limit"),
        (HttpFail(503, "ServiceUnavailableException", "Service unavailable."), "overloaded"),
        (HttpFail(429, "ModelNotReadyException", "Model is not ready."), "overloaded"),
        (HttpFail(500, "InternalServerException", "Internal error."), "server"),
        (HttpFail(424, "ModelErrorException", "The model failed."), "server"),
        (HttpFail(408, "ModelTimeoutException", "Model timed out."), "network"),
        (HttpFail(403, "AccessDeniedException", "You don't have access to the model."), "auth"),
        (HttpFail(403, "ExpiredTokenException", "The security token expired."), "auth"),
        (
            HttpFail(400, "ValidationException", "Input is too long for requested model."),
            "context_overflow",
        ),
        (
            HttpFail(
                400, "ValidationException", "prompt is too long: 210000 tokens > 200000", True
            ),
            "context_overflow",
        ),
        (
            HttpFail(400, "ValidationException", "messages.0.content: blank text", True),
            "bad_request",
        ),
        (HttpFail(404, "ResourceNotFoundException", "Model not found."), "bad_request"),
        (
            HttpFail(
                403,
                "AccessDeniedException",
                "Model access is denied due to INVALID_PAYMENT_INSTRUMENT: "
                "A valid payment instrument must be provided.",
            ),
            "billing",
        ),
    ],
)
async def test_errors_before_the_stream_are_classified_by_exception_name(
    fake: FakeBedrockRuntime, fail: HttpFail, error_class: str
) -> None:
    fake.script(fail)
    with pytest.raises(ProviderError) as caught:
        await collect(make(fake), request())
    assert caught.value.error_class == error_class
    assert caught.value.status == fail.status
    assert fail.name in str(caught.value)


@pytest.mark.parametrize(
    ("name", "message", "error_class", "status"),
    [
        ("throttlingException", "Too many tokens per minute.", "rate_limit", 429),
        ("serviceUnavailableException", "Service unavailable.", "overloaded", 503),
        ("internalServerException", "Internal error.", "server", 500),
        ("modelStreamErrorException", "The stream failed.", "server", 424),
        ("validationException", "max tokens exceeded for this model", "context_overflow", 400),
        ("validationException", "bad tool schema", "bad_request", 400),
    ],
)
async def test_exceptions_inside_the_stream_are_classified_by_name(
    fake: FakeBedrockRuntime, name: str, message: str, error_class: str, status: int
) -> None:
    fake.script(StreamFail(name, message, text="partial "))
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderError) as caught:
        async for event in make(fake).stream(request()):
            seen.append(event)
    assert seen == [TextDelta("partial ")]
    assert (caught.value.error_class, caught.value.status) == (error_class, status)
    assert message in str(caught.value)


async def test_a_stream_error_with_the_models_429_is_a_rate_limit(
    fake: FakeBedrockRuntime,
) -> None:
    fake.script(
        StreamFail(
            "modelStreamErrorException",
            "Model error.",
            extra={"originalStatusCode": 429, "originalMessage": "Too many requests"},
        )
    )
    with pytest.raises(ProviderError) as caught:
        await collect(make(fake), request())
    assert caught.value.error_class == "rate_limit"


async def test_a_corrupt_message_is_a_network_error(fake: FakeBedrockRuntime) -> None:
    fake.script(Corrupt())
    with pytest.raises(ProviderError) as caught:
        await collect(make(fake), request())
    assert caught.value.error_class == "network"
    assert "corrupt" in str(caught.value)


async def test_a_stream_cut_before_its_end_is_a_network_error(fake: FakeBedrockRuntime) -> None:
    fake.script(Reply(text="half an answer", cut=True))
    with pytest.raises(ProviderError) as caught:
        await collect(make(fake), request())
    assert caught.value.error_class == "network"
    assert "ended early" in str(caught.value)


async def test_closing_the_stream_early_frees_the_connection(fake: FakeBedrockRuntime) -> None:
    fake.script(Reply(text="a long answer " * 50, chunk=3), Reply(text="next"))
    provider = make(fake)
    stream = provider.stream(request())
    assert isinstance(stream, AsyncGenerator)  # what the router closes
    assert isinstance(await anext(stream), TextDelta)
    await stream.aclose()  # a turn stopped by the user
    events = await collect(provider, request())
    assert isinstance(events[-1], StreamDone)


async def test_an_unreachable_endpoint_is_a_network_error(aws: pytest.MonkeyPatch) -> None:
    config = ProviderConfig(type="bedrock", base_url="http://127.0.0.1:9", region="us-east-1")
    provider = create(config)
    _made.append(provider)
    with pytest.raises(ProviderError) as caught:
        await collect(provider, request())
    assert caught.value.error_class == "network"


# -- lazy ----------------------------------------------------------------------------------


async def test_configuring_bedrock_imports_no_botocore_until_the_first_call(
    tmp_path: Path,
) -> None:
    code = (
        "import sys\n"
        "from habakkuk.engine.config import ProviderConfig\n"
        "from habakkuk.engine.llm.factory import build_provider\n"
        "from pathlib import Path\n"
        "build_provider(ProviderConfig(type='bedrock', region='us-east-1'), Path('.'))\n"
        "print('BOTOCORE', any(m.startswith('botocore') for m in sys.modules))\n"
    )
    status, out, err = await python_in(code, tmp_path)
    assert status == 0, err
    assert "BOTOCORE False" in out


# -- a whole turn --------------------------------------------------------------------------


def test_habakkuk_run_calls_a_tool_through_bedrock_and_usage_prices_it(
    aws: pytest.MonkeyPatch, write_config: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from habakkuk.cli import main
    from tests.fakes.loopback import Threaded

    with Threaded(FakeBedrockRuntime()) as server:
        server.credentials[ACCESS_KEY] = (SECRET, None)
        write_config(
            "providers:\n"
            f"  aws:\n    type: bedrock\n    base_url: {server.base_url}\n"
            "    region: us-east-1\n"
            "agents:\n  main:\n    model: aws/us.anthropic.claude-haiku-4-5-20251001-v1:0\n"
            "    mode: full\n"
        )
        server.script(
            Reply(
                text="Looking.",
                tool_calls=[ToolCall("list_dir", {"path": "."}, "tooluse_1")],
                input_tokens=1000,
                output_tokens=100,
            ),
            Reply(text="Hello from Bedrock.", input_tokens=2000, output_tokens=400),
        )
        assert main(["run", "--json", "list the workspace"]) == 0
        body = json.loads(capsys.readouterr().out)
        assert (body["status"], body["reply"]) == ("done", "Hello from Bedrock.")
        first, second = server.requests
    assert first.auth == second.auth == "sigv4"
    assert "list_dir" in [t["toolSpec"]["name"] for t in first.body["toolConfig"]["tools"][:-1]]
    results = [
        b["toolResult"] for m in second.body["messages"] for b in m["content"] if "toolResult" in b
    ]
    assert [(r["toolUseId"], r["status"]) for r in results] == [("tooluse_1", "success")]
    assert results[0]["content"][0]["text"]

    assert main(["usage", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["input_tokens"], row["output_tokens"]) == (3000, 500)
    assert row["cost"] == pytest.approx((3000 * 1.0 + 500 * 5.0) / 1e6)  # Claude Haiku 4.5


# -- config --------------------------------------------------------------------------------


def test_the_bedrock_preset_is_native_and_needs_no_key(home: Any) -> None:
    from habakkuk.engine.config import parse_config
    from habakkuk.engine.presets import key_optional

    text = (
        "providers:\n  bedrock: {region: eu-west-3}\n"
        "agents:\n  main: {model: bedrock/eu.amazon.nova-pro-v1:0}\n"
    )
    provider = parse_config(text, home.config_path, home).providers["bedrock"]
    assert (provider.type, provider.region) == ("bedrock", "eu-west-3")
    assert provider.key_vars == ["AWS_BEARER_TOKEN_BEDROCK"]
    assert key_optional(provider)
    assert key_optional(ProviderConfig(type="bedrock"))


@pytest.mark.parametrize(
    ("provider", "said"),
    [
        ("{type: openai, region: us-east-1}", "only a bedrock provider takes a region"),
        ("{type: bedrock, region: the-moon}", "'the-moon' is not an AWS region"),
        ("{type: bedrockx}", "bedrock"),
    ],
)
def test_a_bad_region_or_type_is_a_config_error_naming_the_line(
    home: Any, provider: str, said: str
) -> None:
    from habakkuk.engine.config import parse_config
    from habakkuk.engine.errors import ConfigError

    text = f"providers:\n  p: {provider}\nagents:\n  main: {{model: p/m}}\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(text, home.config_path, home)
    assert said in str(caught.value)
    assert ":2:" in str(caught.value)


@pytest.mark.parametrize(("region", "said"), [("us-east-1", "works"), (None, "no AWS region")])
def test_setup_offers_bedrock_on_the_aws_credentials_with_no_key(
    home: Any,
    aws: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    region: str | None,
    said: str,
) -> None:
    from habakkuk.cli import main
    from habakkuk.engine.config import load_config
    from habakkuk.engine.llm import keys
    from habakkuk.services.setup import CHOICES
    from tests.cli.test_setup import Answers

    aws.setattr(keys, "keyring_backend", lambda: None)
    if region:
        aws.setenv("AWS_REGION", region)
    number = str([c.name for c in CHOICES].index("bedrock") + 1)
    save_anyway = [] if region else ["y"]
    Answers(aws, [number, *save_anyway, "", str(tmp_path / "ws")], [""])
    # saved anyway without a region, the doctor that ends setup says so (and exits 1)
    assert main(["setup"]) == (0 if region else 1)
    out = capsys.readouterr().out
    assert said in out
    assert region or "FAIL  key bedrock: no AWS region" in out
    config = load_config(home)
    assert config.providers["bedrock"].type == "bedrock"
    assert str(config.agent(None).chain[0]) == (
        "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    )
    assert not home.env_path.exists()  # no key given: nothing stored


def test_nova_and_claude_on_bedrock_have_list_prices() -> None:
    from habakkuk.engine.llm.pricing import PriceTable

    table = PriceTable()
    nova = table.lookup("us.amazon.nova-pro-v1:0")
    assert nova is not None and (nova.input, nova.output) == (0.80, 3.20)
    claude = table.lookup(CLAUDE)
    assert claude is not None and (claude.input, claude.output) == (3.0, 15.0)


def test_doctor_says_what_a_keyless_bedrock_provider_lacks(
    aws: pytest.MonkeyPatch, write_config: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # it said "key b: none needed" while every call failed for want of a region
    from habakkuk.cli import main

    aws.delenv("AWS_ACCESS_KEY_ID")
    aws.delenv("AWS_SECRET_ACCESS_KEY")
    write_config(f"providers:\n  b: {{type: bedrock}}\nagents:\n  main: {{model: b/{CLAUDE}}}\n")
    assert main(["doctor"]) == 1
    assert "FAIL  key b: no AWS region: set providers.b.region" in capsys.readouterr().out
    write_config(
        "providers:\n  b: {type: bedrock, region: us-east-1}\n"
        f"agents:\n  main: {{model: b/{CLAUDE}}}\n"
    )
    assert main(["doctor"]) == 1
    assert "FAIL  key b: no AWS credentials found" in capsys.readouterr().out
    aws.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    aws.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    main(["doctor"])
    assert "ok    key b: AWS credentials, region us-east-1" in capsys.readouterr().out
