"""fal: every model runs through its queue. POST {base}/{model} with the input answers
request_id, status_url and response_url; the status URL is polled until COMPLETED; the
response URL gives the model's output, whose files (images[].url, video.url) are
downloaded (from fal's file host, without the key). The same queue serves images and
video, so both are jobs and both resume after a crash.

The key is sent only to the configured base URL's origin: a status or response URL
elsewhere is refused, never followed with the key.
"""

from __future__ import annotations

import base64
from typing import Any

from .http import ApiProvider, same_origin
from .media import sniff
from .types import (
    GenerationError,
    ImageRequest,
    InputImage,
    Made,
    Output,
    Progress,
    Submitted,
    TransientError,
    VideoRequest,
)


def data_uri(picture: InputImage) -> str:
    """An input image as fal takes a file inline."""
    return f"data:{picture.media_type};base64,{base64.b64encode(picture.data).decode('ascii')}"


def _size(size: str) -> dict[str, int] | str:
    width, _, height = size.partition("x")
    if width.isdigit() and height.isdigit():
        return {"width": int(width), "height": int(height)}
    return "square_hd"


class FalQueue(ApiProvider):
    """The queue protocol, shared by the image and video models."""

    name = "fal"
    key_header = "Authorization"
    key_prefix = "Key "

    async def _submit(self, model: str, body: dict[str, Any], *, key: str) -> Submitted:
        answer = await self.api.request(
            "POST", f"{self.api.base_url}/{model}", key=key, json_body=body
        )
        request_id = answer.get("request_id")
        urls = {k: answer.get(k) for k in ("status_url", "response_url")}
        if not isinstance(request_id, str) or not request_id:
            raise GenerationError("fal: the answer names no request_id")
        for name, url in urls.items():
            if not isinstance(url, str) or not same_origin(url, self.api.base_url):
                raise GenerationError(f"fal: the answer's {name} is not on {self.api.base_url}")
        return Submitted(request_id, {k: str(v) for k, v in urls.items()})

    async def poll(self, job: Submitted, *, key: str) -> Progress:
        answer = await self.api.request("GET", self._url(job, "status_url"), key=key, poll=True)
        status = str(answer.get("status", ""))
        if status == "COMPLETED":
            error = answer.get("error")
            if error:
                return Progress("failed", " ".join(str(error).split())[:300])
            return Progress("done")
        if status in ("IN_QUEUE", "IN_PROGRESS"):
            position = answer.get("queue_position")
            shown = f"in queue at {position}" if isinstance(position, int) else status.lower()
            return Progress("running", shown)
        raise TransientError(f"fal: unknown status {status[:40]!r}")

    async def _result(self, job: Submitted, *, key: str) -> dict[str, Any]:
        return await self.api.request("GET", self._url(job, "response_url"), key=key, poll=True)

    async def _file(self, url: str, *, key: str) -> Output:
        if url.startswith("data:"):
            payload = url.partition(",")[2]
            try:
                data = base64.b64decode(payload, validate=True)
            except ValueError:
                raise GenerationError("fal: a file is not valid base64") from None
        else:
            data = await self.api.download(url, key=key)
        kind = sniff(data) or header_type(url)
        return Output(data, kind)

    def _url(self, job: Submitted, name: str) -> str:
        url = job.detail.get(name)
        if not isinstance(url, str) or not same_origin(url, self.api.base_url):
            raise GenerationError(f"fal: the job's {name} is missing")
        return url


def header_type(url: str) -> str:
    """The type a data: URI names, else a generic one."""
    if url.startswith("data:"):
        return url[5:].partition(";")[0] or "application/octet-stream"
    return "application/octet-stream"


class FalImages(FalQueue):
    """image_generate on fal (a queue job: resumable)."""

    async def submit(self, request: ImageRequest, *, key: str) -> Submitted:
        body: dict[str, Any] = {"prompt": request.prompt, "num_images": request.n}
        if request.size != "auto":
            body["image_size"] = _size(request.size)
        if request.edit_from is not None:
            body["image_url"] = data_uri(request.edit_from)
        return await self._submit(self.model, body, key=key)

    async def fetch(self, job: Submitted, done: Progress, *, key: str) -> Made:
        answer = await self._result(job, key=key)
        images = answer.get("images")
        urls = [
            i["url"] for i in images or [] if isinstance(i, dict) and isinstance(i.get("url"), str)
        ]
        if not urls:
            raise GenerationError("fal: the result holds no images")
        return Made([await self._file(url, key=key) for url in urls])


class FalVideos(FalQueue):
    """video_generate on fal (a queue job: resumable); an image starts `image_model`."""

    def __init__(self, model: str, base_url: str, image_model: str) -> None:
        super().__init__(model, base_url)
        self.image_model = image_model or model

    async def submit(self, request: VideoRequest, *, key: str) -> Submitted:
        from .gemini import aspect_ratio

        body: dict[str, Any] = {"prompt": request.prompt, "duration": f"{request.seconds}s"}
        ratio = aspect_ratio(request.size, ("16:9", "9:16", "1:1"))
        if ratio is not None:
            body["aspect_ratio"] = ratio
        model = self.model
        if request.image is not None:
            body["image_url"] = data_uri(request.image)
            model = self.image_model
        return await self._submit(model, body, key=key)

    async def fetch(self, job: Submitted, done: Progress, *, key: str) -> Made:
        answer = await self._result(job, key=key)
        video = answer.get("video")
        url = video.get("url") if isinstance(video, dict) else None
        if not isinstance(url, str):
            raise GenerationError("fal: the result holds no video")
        output = await self._file(url, key=key)
        if not output.media_type.startswith("video/"):
            output = Output(output.data, "video/mp4")
        return Made([output])
