"""Gemini: images from generateContent with image output (one request per image, the
image as inlineData base64 in candidates[].content.parts[]), and Veo video as a
long-running operation (models/{model}:predictLongRunning, then GET the operation until
done, then the sample's file, downloaded with the key)."""

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
    InputImage,
    Made,
    Output,
    Progress,
    Saver,
    Spend,
    Submitted,
    VideoRequest,
)

ASPECT_RATIOS = ("1:1", "2:3", "3:2", "3:4", "4:3", "4:5", "5:4", "9:16", "16:9", "21:9")
_OPERATION = re.compile(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")


def aspect_ratio(size: str, choices: tuple[str, ...] = ASPECT_RATIOS) -> str | None:
    """The ratio of `choices` nearest WIDTHxHEIGHT (None for auto)."""
    width, _, height = size.partition("x")
    if not (width.isdigit() and height.isdigit()):
        return None
    wanted = int(width) / int(height)

    def distance(ratio: str) -> float:
        w, _, h = ratio.partition(":")
        return abs(int(w) / int(h) - wanted)

    return min(choices, key=distance)


def _inline(picture: InputImage) -> dict[str, Any]:
    return {
        "inlineData": {
            "mimeType": picture.media_type,
            "data": base64.b64encode(picture.data).decode("ascii"),
        }
    }


class _Gemini(ApiProvider):
    """The Gemini API, its key in x-goog-api-key."""

    name = "gemini"
    key_header = "x-goog-api-key"


class GeminiImages(_Gemini):
    """image_generate on Gemini (synchronous, one request per image)."""

    async def make(self, request: ImageRequest, *, key: str, each: Saver) -> Spend:
        parts: list[dict[str, Any]] = [{"text": request.prompt}]
        if request.edit_from is not None:
            parts.append(_inline(request.edit_from))
        config: dict[str, Any] = {"responseModalities": ["IMAGE"]}
        ratio = aspect_ratio(request.size)
        if ratio is not None:
            config["imageConfig"] = {"aspectRatio": ratio}
        body = {"contents": [{"role": "user", "parts": parts}], "generationConfig": config}
        url = f"{self.api.base_url}/v1beta/models/{self.model}:generateContent"
        usage = Usage()
        for _ in range(request.n):
            answer = await self.api.request("POST", url, key=key, json_body=body)
            output = _image_of(answer)
            await each(output)
            usage = _add(usage, answer.get("usageMetadata"))
        return Spend(usage=usage)


def _image_of(answer: dict[str, Any]) -> Output:
    for candidate in answer.get("candidates") or []:
        content = candidate.get("content") if isinstance(candidate, dict) else None
        for part in (content or {}).get("parts") or []:
            inline = (
                part.get("inlineData") or part.get("inline_data")
                if isinstance(part, dict)
                else None
            )
            if isinstance(inline, dict) and isinstance(inline.get("data"), str):
                try:
                    raw = base64.b64decode(inline["data"], validate=True)
                except ValueError:
                    raise GenerationError("gemini: an image is not valid base64") from None
                return Output(raw, sniff(raw) or str(inline.get("mimeType") or "image/png"))
    feedback = answer.get("promptFeedback")
    reason = feedback.get("blockReason") if isinstance(feedback, dict) else None
    if not reason:
        candidates = answer.get("candidates") or [{}]
        reason = candidates[0].get("finishReason") if isinstance(candidates[0], dict) else None
    raise GenerationError(
        "gemini: the answer holds no image" + (f" (finish reason {reason})" if reason else "")
    )


def _add(usage: Usage, meta: Any) -> Usage:
    if not isinstance(meta, dict):
        return usage
    prompt, made = meta.get("promptTokenCount"), meta.get("candidatesTokenCount")
    return Usage(
        input_tokens=usage.input_tokens + (prompt if isinstance(prompt, int) else 0),
        output_tokens=usage.output_tokens + (made if isinstance(made, int) else 0),
    )


class GeminiVideos(_Gemini):
    """video_generate on Veo (a long-running operation: resumable)."""

    async def submit(self, request: VideoRequest, *, key: str) -> Submitted:
        instance: dict[str, Any] = {"prompt": request.prompt}
        if request.image is not None:
            instance["image"] = {
                "bytesBase64Encoded": base64.b64encode(request.image.data).decode("ascii"),
                "mimeType": request.image.media_type,
            }
        parameters: dict[str, Any] = {"durationSeconds": request.seconds}
        ratio = aspect_ratio(request.size, ("16:9", "9:16"))
        if ratio is not None:
            parameters["aspectRatio"] = ratio
        url = f"{self.api.base_url}/v1beta/models/{self.model}:predictLongRunning"
        answer = await self.api.request(
            "POST", url, key=key, json_body={"instances": [instance], "parameters": parameters}
        )
        name = answer.get("name")
        if not isinstance(name, str) or not _OPERATION.fullmatch(name) or ".." in name:
            raise GenerationError("gemini: the answer names no operation")
        return Submitted(name)

    async def poll(self, job: Submitted, *, key: str) -> Progress:
        if not _OPERATION.fullmatch(job.job) or ".." in job.job:
            raise GenerationError(f"gemini: {job.job[:80]!r} is not an operation name")
        answer = await self.api.request(
            "GET", f"{self.api.base_url}/v1beta/{job.job}", key=key, poll=True
        )
        if not answer.get("done"):
            return Progress("running", "running")
        error = answer.get("error")
        if isinstance(error, dict):
            return Progress("failed", str(error.get("message") or "the operation failed"))
        response = answer.get("response")
        result = response.get("generateVideoResponse") if isinstance(response, dict) else None
        samples = result.get("generatedSamples") if isinstance(result, dict) else None
        uris = [
            s["video"]["uri"]
            for s in samples or []
            if isinstance(s, dict)
            and isinstance(s.get("video"), dict)
            and isinstance(s["video"].get("uri"), str)
        ]
        if not uris:
            reasons = result.get("raiMediaFilteredReasons") if isinstance(result, dict) else None
            why = "; ".join(str(r) for r in reasons) if isinstance(reasons, list) else ""
            return Progress("failed", why or "the operation finished without a video")
        return Progress("done", detail={"uri": uris[0]})

    async def fetch(self, job: Submitted, done: Progress, *, key: str) -> Made:
        data = await self.api.download(str(done.detail["uri"]), key=key)
        return Made([Output(data, sniff(data) or "video/mp4")])
