"""Tools that reach the chat a turn belongs to: send_file, poll and speak (with `tts:`).

Registered (toolset core) when any chat runs (a configured channel, or the web chat of
the HTTP server), bound to the running channel service (engine/toolkit/service_tool.py:
made after the tools, so bound as a function that returns it, or None while channels do
not run in this process). The chat is the
turn's reply address (the gateway puts it in the turn job), else the chat the
session is bound to; in a session with no chat the tools say so.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol

from habakkuk.engine.outbox_access import TurnChats
from habakkuk.engine.toolkit.permissions import Risk, inside
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolError, ToolOutput
from habakkuk.engine.tts_config import TtsConfig
from habakkuk.voice.speech import SpeechSynthesizer

FILE_LIMIT_BYTES = 50 * 1024 * 1024


class ChatOutbox(TurnChats, Protocol):
    """What the tools need from the channel service: the turn's chat, and the outbox's
    files and polls."""

    async def send_file(
        self,
        job_id: str,
        to: str,
        path: Path,
        name: str = "",
        caption: str = "",
        *,
        voice: bool = False,
        duration: float | None = None,
    ) -> bool: ...

    async def send_poll(
        self, job_id: str, to: str, question: str, options: list[str], multiple: bool = False
    ) -> bool: ...


# The running channel service, or None while channels do not run in this process.
OutboxOf = Callable[[], ChatOutbox | None]


class ChatTool(Tool):
    """A tool that sends to the turn's chat through the outbox it was built with."""

    def __init__(self, outbox: OutboxOf) -> None:
        self.outbox_of = outbox

    def outbox(self) -> ChatOutbox:
        found = self.outbox_of()
        if found is None:
            raise ToolError("channels are not running in this process")
        return found

    async def chat(self, ctx: ToolContext) -> str:
        to = await self.outbox().chat_of(ctx.turn, ctx.session)
        if to is None:
            raise ToolError(
                "this session has no chat to send to (it is not a channel conversation)"
            )
        return to


def _call_key(ctx: ToolContext, tool: str, args: dict[str, Any]) -> str:
    """A job id from the session, the turn and the call's arguments (a retried call repeats it)."""
    import hashlib

    body = json.dumps(args, sort_keys=True, ensure_ascii=False)
    digest = hashlib.sha256(f"{ctx.session}\x00{ctx.turn}\x00{body}".encode()).hexdigest()
    return f"{tool}:{ctx.session}:{digest[:16]}"


class SendFile(ChatTool):
    """send_file(path, caption?): send a file to the chat of this conversation."""

    name: ClassVar[str] = "send_file"
    description: ClassVar[str] = (
        "Send a file to the chat this conversation is in (a photo or a document). "
        "It arrives before your reply. Workspace files are always sendable."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "the file to send"},
            "caption": {"type": "string", "description": "optional text shown with it"},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    risk: ClassVar[Risk] = Risk.WRITE
    reads_files: ClassVar[bool] = True  # it sends the contents away

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path] | None:
        return [ctx.resolve(str(args.get("path", "")))]

    def risk_for(self, args: dict[str, Any], ctx: ToolContext) -> Risk:
        # Workspace files are always sendable; anything else is treated like a write
        # out of the workspace (full mode, or approval).
        if inside(ctx.resolve(str(args.get("path", ""))), ctx.workspace):
            return Risk.READ
        return Risk.WRITE

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        to = await self.chat(ctx)
        path = ctx.resolve(str(args["path"]))
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise ToolError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise ToolError(f"{path}: is a directory") from None
        if len(data) > FILE_LIMIT_BYTES:
            raise ToolError(f"{path}: {len(data):,} bytes is over the 50 MB limit")
        blob = await ctx.blobs.put(data, path.suffix)
        caption = str(args.get("caption", ""))
        job = _call_key(ctx, self.name, args)
        await self.outbox().send_file(job, to, blob, path.name, caption)
        return ToolOutput(f"queued {path.name} ({len(data):,} bytes) for {to}")


class Poll(ChatTool):
    """poll(question, options, multiple?): post a poll to the chat."""

    name: ClassVar[str] = "poll"
    description: ClassVar[str] = (
        "Post a poll to the chat this conversation is in (a native poll where the "
        "platform has one, else a numbered list). Votes are not read back."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "question": {"type": "string", "minLength": 1, "maxLength": 300},
            "options": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 100},
                "minItems": 2,
                "maxItems": 10,
            },
            "multiple": {"type": "boolean", "description": "allow several answers"},
        },
        "required": ["question", "options"],
        "additionalProperties": False,
    }
    risk: ClassVar[Risk] = Risk.READ

    def title(self, args: dict[str, Any]) -> str:
        return str(args.get("question", ""))[:200]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        to = await self.chat(ctx)
        options = [str(o) for o in args["options"]]
        job = _call_key(ctx, self.name, args)
        await self.outbox().send_poll(
            job, to, str(args["question"]), options, bool(args.get("multiple", False))
        )
        return ToolOutput(f"poll queued for {to}")


class Speak(ChatTool):
    """speak(text, voice?): say something to the chat as a voice note (spec 000 "Media":
    Speech). The audio is saved under voice/ in the workspace, then queued as a file
    with the voice flag and its length: a voice note where the platform has them, an
    audio file elsewhere."""

    name: ClassVar[str] = "speak"
    description: ClassVar[str] = (
        "Say something to the user as a voice note in the chat this conversation is in "
        "(text to speech; plain sentences, no Markdown). The audio is also saved under "
        "voice/ in the workspace. It arrives before your reply."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "minLength": 1, "description": "what to say"},
            "voice": {"type": "string", "description": "a voice of the provider (optional)"},
        },
        "required": ["text"],
        "additionalProperties": False,
    }
    risk: ClassVar[Risk] = Risk.NETWORK  # the text goes to the speech provider

    def __init__(self, outbox: OutboxOf, tts: TtsConfig, synthesizer: SpeechSynthesizer) -> None:
        super().__init__(outbox)
        self.tts = tts
        self.synthesizer = synthesizer

    def title(self, args: dict[str, Any]) -> str:
        return str(args.get("text", ""))[:200]

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path] | None:
        return [ctx.workspace / "voice"]  # where the audio is saved

    def risk_for(self, args: dict[str, Any], ctx: ToolContext) -> Risk:
        # espeak-ng speaks on this machine: only a file in the workspace is written (run in
        # workspace mode, refused read-only); the others send the text to the provider.
        return Risk.WRITE if self.tts.provider == "espeak" else Risk.NETWORK

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        from habakkuk.voice.speech import SpeechError, suffix_of

        text = str(args["text"]).strip()
        if len(text) > self.tts.max_chars:
            raise ToolError(
                f"the text is {len(text):,} characters; tts.max_chars allows "
                f"{self.tts.max_chars:,} (say less, or split it)"
            )
        to = await self.chat(ctx)  # before paying for speech no chat can get
        voice = str(args.get("voice") or "").strip() or None
        try:
            spoken = await self.synthesizer.synthesize(text, voice)
        except SpeechError as exc:
            raise ToolError(str(exc)) from None
        job = _call_key(ctx, self.name, args)
        suffix = suffix_of(spoken.mime)
        name = f"{job.rsplit(':', 1)[-1]}{suffix}"
        saved = ctx.workspace / "voice" / name
        await asyncio.to_thread(_write, saved, spoken.data)
        blob = await ctx.blobs.put(spoken.data, suffix)
        await self.outbox().send_file(
            job, to, blob, name, voice=spoken.mime == "audio/ogg", duration=spoken.duration_s
        )
        length = f", {spoken.duration_s:.1f} s" if spoken.duration_s is not None else ""
        kind = "voice note" if spoken.mime == "audio/ogg" else f"audio file ({spoken.mime})"
        return ToolOutput(f"queued a {kind} for {to} (voice/{name}{length})")


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
