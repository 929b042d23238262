"""OpenAI: images in the request's own answer (/images/generations, multipart
/images/edits; b64_json in data[], token usage for the gpt-image models) and the Videos
API as a job (POST /videos, GET /videos/{id} until completed or failed, then /content).
"""

from __future__ import annotations

import base64
import re
from typing import Any

from habakkuk.engine.llm.types import Usage

from .http import ApiProvider
from .media import sniff
from .types import (
    GenerationError,
    ImageRequest,
    Made,
    Output,
    Progress,
    Saver,
    Spend,
    Submitted,
    VideoRequest,
)

# Sora renders 4, 8 or 12 seconds; anything else is snapped to the nearest (ties up).
SORA_SECONDS = (4, 8, 12)
_VIDEO_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")


def snap_seconds(seconds: int) -> int:
    """The Sora length nearest `seconds` (a tie takes the longer one)."""
    return min(SORA_SECONDS, key=lambda s: (abs(s - seconds), -s))


class _OpenAI(ApiProvider):
    """The OpenAI API, its key a bearer token."""

    name = "openai"
    key_header = "Authorization"
    key_prefix = "Bearer "


class OpenAIImages(_OpenAI):
    """image_generate on OpenAI (synchronous: nothing to resume)."""

    async def make(self, request: ImageRequest, *, key: str, each: Saver) -> Spend:
        base = self.api.base_url
        if request.edit_from is None:
            body: dict[str, Any] = {
                "model": self.model,
                "prompt": request.prompt,
                "n": request.n,
                "size": request.size,
            }
            if self.model.startswith("dall-e"):
                body["response_format"] = "b64_json"  # gpt-image models always answer so
            answer = await self.api.request(
                "POST", f"{base}/images/generations", key=key, json_body=body
            )
        else:
            answer = await self.api.request(
                "POST", f"{base}/images/edits", key=key, form=self._edit_form(request)
            )
        data = answer.get("data")
        if not isinstance(data, list) or not data:
            raise GenerationError("openai: the answer holds no images")
        for item in data:
            encoded = item.get("b64_json") if isinstance(item, dict) else None
            if not isinstance(encoded, str):
                raise GenerationError("openai: an image came without b64_json")
            raw = _b64(encoded, "openai")
            await each(Output(raw, sniff(raw) or "image/png"))
        return Spend(usage=_usage(answer.get("usage")))

    def _edit_form(self, request: ImageRequest) -> Any:
        import aiohttp

        assert request.edit_from is not None
        form = aiohttp.FormData(default_to_multipart=True)
        form.add_field("model", self.model)
        form.add_field("prompt", request.prompt)
        form.add_field("n", str(request.n))
        form.add_field("size", request.size)
        if self.model.startswith("dall-e"):
            form.add_field("response_format", "b64_json")
        picture = request.edit_from
        form.add_field(
            "image", picture.data, filename=picture.name, content_type=picture.media_type
        )
        return form


class OpenAIVideos(_OpenAI):
    """video_generate on OpenAI's Videos API (a job: resumable)."""

    async def submit(self, request: VideoRequest, *, key: str) -> Submitted:
        import aiohttp

        form = aiohttp.FormData(default_to_multipart=True)
        form.add_field("model", self.model)
        form.add_field("prompt", request.prompt)
        form.add_field("seconds", str(snap_seconds(request.seconds)))
        form.add_field("size", request.size)
        if request.image is not None:
            picture = request.image
            form.add_field(
                "input_reference",
                picture.data,
                filename=picture.name,
                content_type=picture.media_type,
            )
        answer = await self.api.request("POST", f"{self.api.base_url}/videos", key=key, form=form)
        video = answer.get("id")
        if not isinstance(video, str) or not _VIDEO_ID.fullmatch(video):
            raise GenerationError("openai: the answer names no video id")
        return Submitted(video)

    async def poll(self, job: Submitted, *, key: str) -> Progress:
        answer = await self.api.request(
            "GET", f"{self.api.base_url}/videos/{_checked(job.job)}", key=key, poll=True
        )
        status = str(answer.get("status", ""))
        if status == "completed":
            return Progress("done")
        if status == "failed":
            error = answer.get("error")
            why = error.get("message") if isinstance(error, dict) else None
            return Progress("failed", str(why or "the video failed"))
        progress = answer.get("progress")
        shown = f"{status} {progress}%" if isinstance(progress, (int, float)) else status
        return Progress("running", shown)

    async def fetch(self, job: Submitted, done: Progress, *, key: str) -> Made:
        url = f"{self.api.base_url}/videos/{_checked(job.job)}/content"
        data = await self.api.download(url, key=key)
        return Made([Output(data, sniff(data) or "video/mp4")])


def _checked(video: str) -> str:
    if not _VIDEO_ID.fullmatch(video):
        raise GenerationError(f"openai: {video[:80]!r} is not a video id")
    return video


def _b64(text: str, provider: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise GenerationError(f"{provider}: an image is not valid base64") from None


def _usage(raw: Any) -> Usage:
    """gpt-image's usage: input and output tokens (images are priced by them)."""
    if not isinstance(raw, dict):
        return Usage()
    return Usage(
        input_tokens=_int(raw.get("input_tokens")), output_tokens=_int(raw.get("output_tokens"))
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
