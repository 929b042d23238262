"""image_generate and video_generate (spec 000 "Media": Images, Video).

Both are network calls that cost money: Risk.NETWORK, as fetch_url (denied in read-only
mode, asked in ask and workspace modes, run in full mode), and both taint the turn
(what comes back is outside content). An input image (edit_from, image) must be inside
the workspace unless the mode is full or ask (where a human approves each call).

Results are saved under workspace/images/ and workspace/videos/ with new names; images
are also shown to the model (ToolOutput.media), scaled as view_image's are. Each call is
journalled (journal.py), so a crash, a retry or a redelivered message never pays for a
second generation.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from habakkuk.engine.config import ImagesConfig, VideoConfig
from habakkuk.engine.llm.types import ImageBlock
from habakkuk.engine.toolkit.permissions import Risk, inside
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolError, ToolOutput
from habakkuk.tools.images import MAX_SOURCE_BYTES, ImageError, prepare

from .journal import Backoff, Journal, Outcome, is_settled, run_job, run_sync, settled
from .media import read_input_image, save_output, stem_for
from .types import (
    Generation,
    ImageMaker,
    ImageRequest,
    InputImage,
    JobProvider,
    Output,
    UsageLog,
    VideoRequest,
)

log = logging.getLogger(__name__)

MAX_IMAGES = 4
MAX_PROMPT = 32_000
IMAGE_TIMEOUT = 300.0  # a queued image (fal) that takes longer is given up
IMAGE_BACKOFF = Backoff(first=1.0, factor=1.5, cap=5.0)


Keys = Callable[[str], "str | None"]


def _environ(name: str) -> str | None:
    return os.environ.get(name) or None


def _size(path: Path) -> str:
    try:
        size = path.stat().st_size
    except OSError:
        return "gone"
    return f"{size / 1024 / 1024:.1f} MB" if size >= 1024 * 1024 else f"{size / 1024:.0f} KB"


def _read_image(path: Path) -> bytes | None:
    """A saved image's bytes; None when it is over MAX_SOURCE_BYTES (not read)."""
    with path.open("rb") as handle:
        data = handle.read(MAX_SOURCE_BYTES + 1)
    return data if len(data) <= MAX_SOURCE_BYTES else None


def _saved(outcome: Outcome, ctx: ToolContext, head: str) -> list[str]:
    """The heading of an answer (saying so when an earlier run of the call made the
    files) and a line for each file saved."""
    if not outcome.fresh:
        head += " (by an earlier run of this call; nothing new was generated)"
    return [f"{head}:", *(f"- {_shown(p, ctx.workspace)} ({_size(p)})" for p in outcome.saved)]


def _shown(path: Path, workspace: Path) -> str:
    try:
        return str(path.relative_to(os.path.realpath(workspace)))
    except ValueError:
        return str(path)


class _Generate(Tool):
    """What the two tools share: risk, the input image's rules, the journal's plumbing."""

    risk = Risk.NETWORK
    taints = True
    resumable = True
    reads_files = True
    image_arg: ClassVar[str]

    def __init__(self, usage: UsageLog | None = None, keys: Keys = _environ) -> None:
        self.usage = usage
        self.keys = keys

    def key(self, env_name: str) -> str:
        """The API key (never logged, never in a result); ToolError when unset."""
        value = (self.keys(env_name) or "").strip()
        if not value:
            raise ToolError(f"{self.name}: the API key variable {env_name} is not set")
        return value

    def title(self, args: dict[str, Any]) -> str:
        return str(args.get("prompt", ""))[:200]

    async def _journal(self, ctx: ToolContext, provider: str) -> tuple[Journal, Outcome | None]:
        """The call's journal, and its outcome when an earlier run of this call decided it
        (then it needs no key, no input and no request)."""
        journal = Journal(ctx.state, ctx, self.name, provider)
        earlier = await journal.earlier()
        if earlier is not None and is_settled(earlier):
            return journal, await settled(journal, earlier)
        return journal, None

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path] | None:
        given = args.get(self.image_arg)
        return [ctx.resolve(given)] if isinstance(given, str) and given else None

    def refuse(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        for path in self.paths(args, ctx) or ():
            if ctx.mode not in ("full", "ask") and not inside(path, ctx.workspace):
                return (
                    f"{self.image_arg} must be a file inside the workspace in {ctx.mode} mode "
                    f"({path} is not)"
                )
        return None

    async def _input(self, args: dict[str, Any], ctx: ToolContext) -> InputImage | None:
        paths = self.paths(args, ctx)
        if not paths:
            return None
        data, kind = await asyncio.to_thread(read_input_image, paths[0], self.name)
        return InputImage(data, kind, paths[0].name)

    async def _record(
        self, kind: str, provider: str, model: str, outcome: Outcome, ctx: ToolContext
    ) -> None:
        if self.usage is None or not outcome.fresh:
            return
        try:
            spend = outcome.spend
            await self.usage.record_generation(
                Generation(kind, provider, model, ctx.agent, ctx.session, spend.usage, spend.cost)
            )
        except Exception as exc:  # the files are saved and paid for: the call still succeeds
            log.warning("%s: cannot record its usage: %s", self.name, exc)


class ImageGenerate(_Generate):
    """The image_generate tool."""

    name = "image_generate"
    description = (
        "Generate images from a text prompt (or edit one: edit_from, a workspace image) with "
        "the configured image model. They are saved under images/ in the workspace and shown "
        "to you; send one to the user with send_file. Each call is a paid request."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "minLength": 1, "maxLength": MAX_PROMPT},
            "size": {
                "type": "string",
                "pattern": r"^([1-9][0-9]{1,4}x[1-9][0-9]{1,4}|auto)$",
                "description": "WIDTHxHEIGHT, e.g. 1024x1024 (default: the configured size)",
            },
            "n": {"type": "integer", "minimum": 1, "maximum": MAX_IMAGES},
            "edit_from": {"type": "string", "description": "a PNG, JPEG or WebP to edit"},
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }
    image_arg = "edit_from"

    def __init__(
        self,
        config: ImagesConfig,
        provider: ImageMaker | JobProvider,
        usage: UsageLog | None = None,
        *,
        keys: Keys = _environ,
        backoff: Backoff = IMAGE_BACKOFF,
        timeout: float = IMAGE_TIMEOUT,
    ) -> None:
        super().__init__(usage, keys)
        self.config = config
        self.provider = provider
        self.backoff = backoff
        self.timeout = timeout

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        journal, decided = await self._journal(ctx, self.provider.name)
        if decided is not None:
            return await self._answer(decided, journal, ctx)
        request = ImageRequest(
            prompt=args["prompt"],
            size=str(args.get("size") or self.config.size),
            n=int(args.get("n", 1)),
            edit_from=await self._input(args, ctx),
        )
        key = self.key(self.config.key_env)
        count = 0

        async def save_one(output: Output) -> Path:
            nonlocal count
            stem = stem_for(request.prompt, count)
            count += 1
            return await asyncio.to_thread(
                save_output, ctx.workspace, "images", stem, output.data, output.media_type
            )

        async def save_all(outputs: list[Output]) -> list[Path]:
            return [await save_one(o) for o in outputs]

        if isinstance(self.provider, ImageMaker):
            outcome = await run_sync(journal, self.provider, request, key=key, save=save_one)
        else:
            outcome = await run_job(
                journal,
                self.provider,
                request,
                key=key,
                save=save_all,
                backoff=self.backoff,
                timeout=self.timeout,
            )
        return await self._answer(outcome, journal, ctx)

    async def _answer(self, outcome: Outcome, journal: Journal, ctx: ToolContext) -> ToolOutput:
        text = self._text(outcome, ctx)
        if outcome.fresh:
            await journal.done({"saved": [str(p) for p in outcome.saved]}, text)
        await self._record("image", self.provider.name, self.provider.model, outcome, ctx)
        media, notes = await self._media(outcome.saved, ctx)
        return ToolOutput("\n".join([text, *notes]), media=media)

    def _text(self, outcome: Outcome, ctx: ToolContext) -> str:
        head = f"Saved {len(outcome.saved)} image(s) in the workspace"
        tail = "Send one to the user with send_file."
        if outcome.note:
            tail = f"{outcome.note}\n{tail}"
        return "\n".join([*_saved(outcome, ctx, head), tail])

    async def _media(
        self, saved: list[Path], ctx: ToolContext
    ) -> tuple[list[ImageBlock], list[str]]:
        """The saved images as the model is shown them, through images.prepare as
        view_image's are (a large one scaled to a JPEG; the file stays as generated), and
        a line for each that cannot be shown."""
        blocks: list[ImageBlock] = []
        notes: list[str] = []
        for path in saved:
            try:
                data = await asyncio.to_thread(_read_image, path)
            except OSError:
                continue  # moved or deleted since: the text still names it
            if data is None:
                limit = MAX_SOURCE_BYTES // (1024 * 1024)
                notes.append(f"Not shown to you: {path.name} is over {limit} MB.")
                continue
            try:
                image = await asyncio.to_thread(prepare, data, path.name)
            except ImageError as exc:
                notes.append(f"Not shown to you: {exc}.")
                continue
            blob = await ctx.blobs.put(image.data, image.suffix)
            name = f"{path.stem}.jpg" if image.scaled else path.name
            blocks.append(ImageBlock(image.media_type, blob=str(blob), name=name))
        return blocks, notes


class VideoGenerate(_Generate):
    """The video_generate tool."""

    name = "video_generate"
    description = (
        "Generate a video clip from a text prompt (optionally starting from a workspace image) "
        "with the configured video model. It waits until the clip is ready (minutes), saves "
        "it under videos/ in the workspace; send it to the user with send_file. Each call is "
        "a paid request."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "minLength": 1, "maxLength": MAX_PROMPT},
            "seconds": {"type": "integer", "minimum": 1, "maximum": 60},
            "image": {"type": "string", "description": "a PNG, JPEG or WebP to start from"},
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }
    image_arg = "image"

    def __init__(
        self,
        config: VideoConfig,
        provider: JobProvider,
        usage: UsageLog | None = None,
        *,
        keys: Keys = _environ,
        backoff: Backoff | None = None,
    ) -> None:
        super().__init__(usage, keys)
        self.config = config
        self.provider = provider
        self.backoff = backoff or Backoff(
            first=config.poll_seconds, cap=max(30.0, config.poll_seconds)
        )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        journal, decided = await self._journal(ctx, self.provider.name)
        if decided is not None:
            return self._answer(decided, ctx)
        request = VideoRequest(
            prompt=args["prompt"],
            seconds=int(args.get("seconds", self.config.seconds)),
            size=self.config.size,
            image=await self._input(args, ctx),
        )
        key = self.key(self.config.key_env)

        async def save_all(outputs: list[Output]) -> list[Path]:
            return [
                await asyncio.to_thread(
                    save_output, ctx.workspace, "videos", stem_for(request.prompt, i),
                    o.data, o.media_type,
                )
                for i, o in enumerate(outputs)
            ]  # fmt: skip

        outcome = await run_job(
            journal,
            self.provider,
            request,
            key=key,
            save=save_all,
            backoff=self.backoff,
            timeout=self.config.timeout_seconds,
        )
        answer = self._answer(outcome, ctx)
        await journal.done({"saved": [str(p) for p in outcome.saved]}, answer.text)
        await self._record("video", self.provider.name, self.provider.model, outcome, ctx)
        return answer

    def _answer(self, outcome: Outcome, ctx: ToolContext) -> ToolOutput:
        head = "Saved the clip in the workspace"
        return ToolOutput(
            "\n".join([*_saved(outcome, ctx, head), "Send it to the user with send_file."])
        )


def image_provider(config: ImagesConfig) -> ImageMaker | JobProvider:
    """The configured image provider."""
    if config.provider == "openai":
        from .openai import OpenAIImages

        return OpenAIImages(config.model, config.base_url)
    if config.provider == "gemini":
        from .gemini import GeminiImages

        return GeminiImages(config.model, config.base_url)
    from .fal import FalImages

    return FalImages(config.model, config.base_url)


def video_provider(config: VideoConfig) -> JobProvider:
    """The configured video provider."""
    if config.provider == "openai":
        from .openai import OpenAIVideos

        return OpenAIVideos(config.model, config.base_url)
    if config.provider == "gemini":
        from .gemini import GeminiVideos

        return GeminiVideos(config.model, config.base_url)
    from .fal import FalVideos

    return FalVideos(config.model, config.base_url, config.image_model)
