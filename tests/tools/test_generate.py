"""image_generate and video_generate against fakes of the providers' real APIs on
127.0.0.1: each provider's request shapes, the files saved, the usage recorded, and the
journal that never pays twice (a call run again resumes or repeats its first outcome)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from habakkuk.engine.config import (
    Config,
    GenerationProvider,
    ImagesConfig,
    VideoConfig,
    parse_config,
)
from habakkuk.engine.home import Environment, Home
from habakkuk.engine.llm.types import ToolUseBlock, Usage
from habakkuk.engine.state import ProviderJob, StateStore
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolRegistry
from habakkuk.tools.generate import generation_tools
from habakkuk.tools.generate.journal import Backoff
from habakkuk.tools.generate.openai import snap_seconds
from habakkuk.tools.generate.tools import (
    ImageGenerate,
    VideoGenerate,
    image_provider,
    video_provider,
)
from habakkuk.tools.generate.types import Generation, UsageLog
from tests.fakes.media_gen import MP4, FakeMedia, png
from tests.helpers import eventually, tool_context

FAST = Backoff(first=0.01, factor=1.5, cap=0.02)
KEYS = {"OPENAI_API_KEY": "sk-o", "GEMINI_API_KEY": "g-key", "FAL_KEY": "f-key"}


@dataclass
class Ledger:
    """A UsageLog that keeps what it was told."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    async def record_generation(self, generation: Generation) -> None:
        g = generation
        self.rows.append(
            {
                "kind": g.kind,
                "provider": g.provider,
                "model": g.model,
                "usage": g.usage,
                "cost": g.cost,
            }
        )


@pytest.fixture
async def fake() -> AsyncIterator[FakeMedia]:
    async with FakeMedia() as server:
        yield server


@pytest.fixture
async def state(tmp_path: Path) -> AsyncIterator[StateStore]:
    store = await StateStore.open(tmp_path / "state.db")
    yield store
    await store.close()


def base(fake: FakeMedia, provider: str) -> str:
    return {"openai": f"{fake.url}/v1", "gemini": f"{fake.url}/gemini", "fal": f"{fake.url}/fal"}[
        provider
    ]


def images_tool(
    fake: FakeMedia, provider: GenerationProvider, ledger: UsageLog | None = None
) -> ImageGenerate:
    config = ImagesConfig(provider, base_url=base(fake, provider))
    resolved = _resolved(images=config)
    assert resolved.images is not None
    return ImageGenerate(
        resolved.images, image_provider(resolved.images), ledger, keys=KEYS.get, backoff=FAST
    )


def video_tool(
    fake: FakeMedia, provider: GenerationProvider, ledger: UsageLog | None = None, **extra: Any
) -> VideoGenerate:
    config = VideoConfig(provider, base_url=base(fake, provider), **extra)
    resolved = _resolved(video=config)
    assert resolved.video is not None
    return VideoGenerate(
        resolved.video, video_provider(resolved.video), ledger, keys=KEYS.get, backoff=FAST
    )


def _resolved(**sections: Any) -> Config:
    from habakkuk.engine.config import _resolve_generation

    config = Config(**sections)
    _resolve_generation(config)
    return config


async def call(
    tool: Tool, ctx: ToolContext, args: dict[str, Any], call_id: str = "call_1"
) -> tuple[str, bool]:
    registry = ToolRegistry()
    registry.register(tool, "media")
    result = await registry.call(ToolUseBlock(call_id, tool.name, args), ctx, {tool.name})
    return result.text, result.is_error


def context(tmp_path: Path, state: StateStore, mode: str = "full") -> ToolContext:
    return tool_context(tmp_path, mode=mode, state=state)


def saved(ctx: ToolContext, folder: str) -> list[Path]:
    where = ctx.workspace / folder
    return sorted(where.iterdir()) if where.exists() else []


# -- images ---------------------------------------------------------------------------


async def test_openai_images_are_saved_in_the_workspace_and_shown_to_the_model(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    ledger = Ledger()
    tool = images_tool(fake, "openai", ledger)
    ctx = context(tmp_path, state)
    text, is_error = await call(tool, ctx, {"prompt": "A red fox, watercolour", "n": 2})
    assert not is_error, text
    [submit] = fake.submits("/v1/images/generations")
    assert submit.key == "Bearer sk-o"
    assert submit.body == {
        "model": "gpt-image-1",
        "prompt": "A red fox, watercolour",
        "n": 2,
        "size": "1024x1024",
    }
    files = saved(ctx, "images")
    assert len(files) == 2 and all(f.read_bytes().startswith(b"\x89PNG") for f in files)
    assert all("a-red-fox-watercolour" in f.name for f in files)
    for f in files:
        assert f"images/{f.name}" in text
    assert "send_file" in text
    assert ledger.rows == [
        {
            "kind": "image",
            "provider": "openai",
            "model": "gpt-image-1",
            "usage": Usage(input_tokens=12, output_tokens=8320),
            "cost": None,
        }
    ]


async def test_a_generated_image_rides_on_the_result_as_media(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    tool = images_tool(fake, "openai")
    ctx = context(tmp_path, state)
    ctx.call_id = "call_media"
    output = await tool.run({"prompt": "a lighthouse"}, ctx)
    [block] = output.media
    [file] = saved(ctx, "images")
    assert block.media_type == "image/png" and block.name == file.name
    assert Path(block.blob).read_bytes() == file.read_bytes()


async def test_a_large_generated_image_is_shown_scaled_and_saved_as_generated(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    fake.side = 3000
    tool = images_tool(fake, "openai")
    ctx = context(tmp_path, state)
    output = await tool.run({"prompt": "a poster"}, ctx)
    [block] = output.media
    [file] = saved(ctx, "images")
    assert file.read_bytes() == png(3000, 3000)  # the original, as the provider sent it
    assert block.media_type == "image/jpeg" and block.name == f"{file.stem}.jpg"
    with Image.open(block.blob) as shown:
        assert shown.format == "JPEG" and max(shown.size) <= 1568
    assert "Not shown" not in output.text


async def test_a_generated_image_that_cannot_be_read_is_saved_and_named_not_shown(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    fake.side, fake.cut = 64, 60  # the provider's PNG is cut off in its pixel data
    tool = images_tool(fake, "openai")
    ctx = context(tmp_path, state)
    text, is_error = await call(tool, ctx, {"prompt": "a lighthouse"})
    assert not is_error, text
    [file] = saved(ctx, "images")
    assert len(file.read_bytes()) == 60
    assert f"images/{file.name}" in text
    assert f"Not shown to you: {file.name}: the PNG data is truncated or corrupt" in text


async def test_openai_edit_sends_the_workspace_image_as_multipart(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    ctx = context(tmp_path, state, mode="workspace")
    (ctx.workspace / "logo.png").write_bytes(png(4, 4))
    registry = ToolRegistry()
    tool = images_tool(fake, "openai")
    registry.register(tool, "media")
    ctx.mode = "full"  # workspace mode asks before a network call; this test is about the wire
    text, is_error = await call(tool, ctx, {"prompt": "make it blue", "edit_from": "logo.png"})
    assert not is_error, text
    [edit] = fake.submits("/v1/images/edits")
    assert edit.body["image"] == {
        "filename": "logo.png",
        "type": "image/png",
        "size": len(png(4, 4)),
    }
    assert edit.body["prompt"] == "make it blue" and edit.body["model"] == "gpt-image-1"
    assert len(saved(ctx, "images")) == 1


async def test_edit_from_outside_the_workspace_is_refused_below_ask_and_full_modes(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(png())
    ctx = context(tmp_path, state, mode="workspace")
    text, is_error = await call(
        images_tool(fake, "openai"), ctx, {"prompt": "x", "edit_from": str(outside)}
    )
    assert is_error and "must be a file inside the workspace in workspace mode" in text
    assert fake.seen == []


async def test_edit_from_that_is_not_an_image_is_an_error_result(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    ctx = context(tmp_path, state)
    (ctx.workspace / "notes.png").write_text("not a picture")
    text, is_error = await call(
        images_tool(fake, "openai"), ctx, {"prompt": "x", "edit_from": "notes.png"}
    )
    assert is_error and "is not a PNG, JPEG or WebP image" in text
    assert fake.seen == []


async def test_gemini_makes_one_request_per_image_with_image_output(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    ledger = Ledger()
    ctx = context(tmp_path, state)
    text, is_error = await call(
        images_tool(fake, "gemini", ledger), ctx, {"prompt": "a kite", "n": 2, "size": "1536x1024"}
    )
    assert not is_error, text
    submits = fake.submits(":generateContent")
    assert len(submits) == 2
    assert submits[0].path == "/gemini/v1beta/models/gemini-2.5-flash-image:generateContent"
    assert submits[0].key == "g-key"
    assert submits[0].body["generationConfig"] == {
        "responseModalities": ["IMAGE"],
        "imageConfig": {"aspectRatio": "3:2"},
    }
    assert submits[0].body["contents"][0]["parts"] == [{"text": "a kite"}]
    assert len(saved(ctx, "images")) == 2
    assert ledger.rows[0]["usage"] == Usage(input_tokens=14, output_tokens=2580)


async def test_fal_images_go_through_the_queue_and_files_come_without_the_key(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    ctx = context(tmp_path, state)
    text, is_error = await call(
        images_tool(fake, "fal"), ctx, {"prompt": "a pear", "n": 2, "size": "512x512"}
    )
    assert not is_error, text
    [submit] = fake.submits("/fal/fal-ai/flux/schnell")
    assert submit.key == "Key f-key"
    assert submit.body == {
        "prompt": "a pear",
        "num_images": 2,
        "image_size": {"width": 512, "height": 512},
    }
    assert fake.polled("/requests/req-1/status") == fake.polls
    downloads = [s for s in fake.seen if s.path.startswith("/cdn/")]
    assert len(downloads) == 2 and all(s.key == "" for s in downloads)
    assert len(saved(ctx, "images")) == 2


# -- video ----------------------------------------------------------------------------


async def test_openai_video_is_polled_until_completed_and_saved(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    ledger = Ledger()
    ctx = context(tmp_path, state)
    text, is_error = await call(
        video_tool(fake, "openai", ledger), ctx, {"prompt": "waves at dusk", "seconds": 6}
    )
    assert not is_error, text
    [submit] = fake.submits("/v1/videos")
    assert submit.body == {
        "model": "sora-2",
        "prompt": "waves at dusk",
        "seconds": "8",
        "size": "1280x720",
    }
    assert fake.polled("/v1/videos/video_1") - fake.polled("/content") == fake.polls
    [clip] = saved(ctx, "videos")
    assert clip.read_bytes() == MP4 and clip.suffix == ".mp4"
    assert f"videos/{clip.name}" in text
    assert [r["kind"] for r in ledger.rows] == ["video"]


def test_sora_lengths_snap_to_4_8_or_12_seconds() -> None:
    assert [snap_seconds(s) for s in (1, 4, 5, 6, 7, 8, 10, 11, 12, 30)] == [
        4, 4, 4, 8, 8, 8, 12, 12, 12, 12,
    ]  # fmt: skip


async def test_openai_video_from_an_image_sends_it_as_input_reference(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    ctx = context(tmp_path, state)
    (ctx.workspace / "start.png").write_bytes(png())
    text, is_error = await call(
        video_tool(fake, "openai"), ctx, {"prompt": "it moves", "image": "start.png"}
    )
    assert not is_error, text
    [submit] = fake.submits("/v1/videos")
    assert submit.body["input_reference"]["filename"] == "start.png"
    assert submit.body["seconds"] == "8"


async def test_gemini_veo_runs_as_an_operation_and_its_file_is_downloaded(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    ctx = context(tmp_path, state)
    text, is_error = await call(video_tool(fake, "gemini"), ctx, {"prompt": "a comet"})
    assert not is_error, text
    [submit] = fake.submits(":predictLongRunning")
    assert submit.path == "/gemini/v1beta/models/veo-3.0-generate-001:predictLongRunning"
    assert submit.body == {
        "instances": [{"prompt": "a comet"}],
        "parameters": {"durationSeconds": 8, "aspectRatio": "16:9"},
    }
    assert fake.polled("/operations/op1") == fake.polls
    [download] = [s for s in fake.seen if "/files/" in s.path]
    assert download.key == "g-key"  # the API's own origin
    [cdn] = [s for s in fake.seen if s.path.startswith("/cdn/")]
    assert cdn.key == ""  # the redirect elsewhere goes without it
    [clip] = saved(ctx, "videos")
    assert clip.read_bytes() == MP4


async def test_fal_video_from_an_image_uses_the_image_model(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    ctx = context(tmp_path, state)
    (ctx.workspace / "still.png").write_bytes(png())
    text, is_error = await call(
        video_tool(fake, "fal"), ctx, {"prompt": "zoom out", "image": "still.png", "seconds": 5}
    )
    assert not is_error, text
    [submit] = fake.submits("/fal/")
    assert submit.path == "/fal/fal-ai/veo3/image-to-video"
    assert submit.body["duration"] == "5s" and submit.body["image_url"].startswith(
        "data:image/png;base64,"
    )
    assert len(saved(ctx, "videos")) == 1


async def test_a_failed_job_is_an_error_result_with_the_providers_reason(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    fake.fail = "the prompt was refused by the safety system"
    ctx = context(tmp_path, state)
    text, is_error = await call(video_tool(fake, "openai"), ctx, {"prompt": "x"})
    assert is_error and "the prompt was refused by the safety system" in text
    assert saved(ctx, "videos") == []


async def test_a_job_past_its_timeout_is_given_up_saying_it_may_still_be_charged(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    fake.hold = True
    ctx = context(tmp_path, state)
    tool = video_tool(fake, "openai", timeout="50ms")
    text, is_error = await call(tool, ctx, {"prompt": "x"})
    assert is_error and "did not finish in time" in text and "may still finish" in text
    assert len(fake.submits("/v1/videos")) == 1


async def test_a_missing_key_is_an_error_result_and_nothing_is_sent(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    tool = images_tool(fake, "openai")
    tool.keys = lambda name: None
    text, is_error = await call(tool, context(tmp_path, state), {"prompt": "x"})
    assert is_error and "OPENAI_API_KEY is not set" in text
    assert fake.seen == []


# -- never paid twice -----------------------------------------------------------------


async def test_a_call_cut_off_mid_poll_resumes_the_same_job_when_run_again(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    fake.hold = True
    ctx = context(tmp_path, state)
    tool = video_tool(fake, "openai")
    first = asyncio.create_task(call(tool, ctx, {"prompt": "rain"}))
    await eventually(lambda: fake.polled("/v1/videos/video_1") >= 2, what="two polls")
    first.cancel()  # as a crash would stop it
    with pytest.raises(asyncio.CancelledError):
        await first
    record = await state.provider_job("ses_1", "turn_1", "call_1")
    assert record is not None and record.status == "running" and record.job == "video_1"
    fake.hold = False
    text, is_error = await call(tool, ctx, {"prompt": "rain"})
    assert not is_error, text
    assert len(fake.submits("/v1/videos")) == 1  # one paid job, polled by both runs
    assert len(saved(ctx, "videos")) == 1


async def test_a_finished_call_run_again_answers_the_same_and_sends_nothing(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    ledger = Ledger()
    ctx = context(tmp_path, state)
    tool = images_tool(fake, "fal", ledger)
    first, _ = await call(tool, ctx, {"prompt": "a boat"})
    seen = len(fake.seen)
    tool.keys = lambda name: None  # not even the key is needed to answer again
    again, is_error = await call(tool, ctx, {"prompt": "a boat"})
    assert not is_error
    assert len(fake.seen) == seen  # no request at all
    assert "earlier run of this call" in again
    assert first.splitlines()[1] == again.splitlines()[1]  # the same file
    assert len(ledger.rows) == 1  # recorded once


async def test_a_synchronous_request_cut_off_is_not_sent_again_but_a_new_call_is(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    await state.begin_provider_job(
        ProviderJob("ses_1", "turn_1", "call_1", "image_generate", "openai", "sending")
    )
    ctx = context(tmp_path, state)
    tool = images_tool(fake, "openai")
    text, is_error = await call(tool, ctx, {"prompt": "a cup"})
    assert is_error and "may have been charged" in text and "not sent again" in text
    assert fake.seen == []
    again, _ = await call(tool, ctx, {"prompt": "a cup"})
    assert again == text  # still the same answer for that call
    fresh, is_error = await call(tool, ctx, {"prompt": "a cup"}, call_id="call_2")
    assert not is_error, fresh
    assert len(fake.submits("/v1/images/generations")) == 1


async def test_a_failed_call_run_again_repeats_its_error_without_a_new_job(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    fake.fail = "no"
    ctx = context(tmp_path, state)
    tool = video_tool(fake, "gemini")
    first, _ = await call(tool, ctx, {"prompt": "x"})
    second, is_error = await call(tool, ctx, {"prompt": "x"})
    assert is_error and second == first
    assert len(fake.submits(":predictLongRunning")) == 1


# -- config, toolset ------------------------------------------------------------------


def _parse(tmp_path: Path, extra: str) -> Config:
    text = "providers: {mock: {type: mock}}\nagents: {main: {model: mock/x}}\n" + extra
    home = Home(tmp_path)
    return parse_config(text, tmp_path / "config.yaml", home)


def test_sections_get_their_providers_defaults(tmp_path: Path) -> None:
    config = _parse(tmp_path, "images: {provider: gemini}\nvideo:\n  provider: fal\n")
    assert config.images is not None and config.video is not None
    assert (config.images.model, config.images.key_env, config.images.base_url) == (
        "gemini-2.5-flash-image",
        "GEMINI_API_KEY",
        "https://generativelanguage.googleapis.com",
    )
    assert (config.video.model, config.video.image_model, config.video.key_env) == (
        "fal-ai/veo3",
        "fal-ai/veo3/image-to-video",
        "FAL_KEY",
    )
    assert config.video.seconds == 8 and config.video.timeout_seconds == 600.0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("images: {provider: dalle}", ":3: images.provider: must be one of openai, gemini, fal"),
        ("images:\n  provider: openai\n  size: big", ":5: images.size: 'big' is not WIDTHxHEIGHT"),
        ("video:\n  provider: openai\n  timeout: soon", ":5: video.timeout: 'soon' is not a dur"),
        ("video:\n  provider: openai\n  image_model: x", ":5: video.image_model: only the fal"),
        ("video:\n  provider: gemini\n  key_env: 'a b'", ":5: video.key_env: 'a b' is not an"),
        ("video:\n  provider: fal\n  seconds: 0", ":5: video.seconds: must be between 1 and 60"),
    ],
)
def test_bad_sections_name_the_file_line_and_key(tmp_path: Path, extra: str, message: str) -> None:
    from habakkuk.engine.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        _parse(tmp_path, extra + "\n")
    assert message in str(caught.value)


def test_the_tools_are_offered_only_when_their_section_exists(tmp_path: Path) -> None:
    assert generation_tools(_parse(tmp_path, ""), None) == []
    config = _parse(tmp_path, "video: {provider: openai}\n")
    assert [t.name for t in generation_tools(config, None, Environment())] == ["video_generate"]
    config = _parse(tmp_path, "images: {provider: openai}\nvideo: {provider: openai}\n")
    names = [t.name for t in generation_tools(config, None)]
    assert names == ["image_generate", "video_generate"]


def test_the_tools_are_network_risk_and_taint_the_turn(tmp_path: Path) -> None:
    from habakkuk.engine.toolkit.permissions import Risk, decide

    config = _parse(tmp_path, "images: {provider: openai}\nvideo: {provider: openai}\n")
    ctx = tool_context(tmp_path)
    for tool in generation_tools(config, None):
        assert tool.risk_for({"prompt": "x"}, ctx) is Risk.NETWORK
        assert tool.taints_turn({"prompt": "x"}, ctx) and tool.resumable
    verdicts = [decide(m, Risk.NETWORK) for m in ("read-only", "ask", "workspace", "full")]
    assert verdicts == ["deny", "ask", "ask", "allow"]  # the same as fetch_url


def test_the_journal_holds_json_detail(tmp_path: Path) -> None:
    async def scenario() -> ProviderJob | None:
        store = await StateStore.open(tmp_path / "state.db")
        try:
            job = ProviderJob("s", "t", "c", "video_generate", "fal", "sending")
            assert await store.begin_provider_job(job)
            assert not await store.begin_provider_job(job)  # one record per call
            await store.update_provider_job(
                "s", "t", "c", status="running", job="req-1", detail={"status_url": "u"}
            )
            return await store.provider_job("s", "t", "c")
        finally:
            await store.close()

    record = asyncio.run(scenario())
    assert record is not None
    assert (record.status, record.job, record.detail) == ("running", "req-1", {"status_url": "u"})
    assert json.dumps(record.detail)


async def test_generations_land_in_the_usage_records_shown_by_usage(
    tmp_path: Path, fake: FakeMedia, state: StateStore
) -> None:
    from habakkuk.engine.llm.usage import UsageStore
    from habakkuk.services.usage import UsageLedger

    store = await UsageStore.open(tmp_path / "usage.db")
    try:
        ledger = UsageLedger(store)
        ctx = context(tmp_path, state)
        await call(images_tool(fake, "openai", ledger), ctx, {"prompt": "a"}, call_id="c1")
        await call(video_tool(fake, "openai", ledger), ctx, {"prompt": "b"}, call_id="c2")
        totals = {t.model: t for t in await ledger.usage_totals(session="ses_1")}
        assert set(totals) == {"openai/gpt-image-1 [image]", "openai/sora-2 [video]"}
        assert totals["openai/gpt-image-1 [image]"].output_tokens == 4160
    finally:
        await store.close()
