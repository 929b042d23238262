"""Fake image and video generation APIs on 127.0.0.1, speaking the providers' real shapes.

- OpenAI (base {url}/v1): POST /images/generations (JSON: model, prompt, n, size ->
  {"created", "data": [{"b64_json"}], "usage"}); POST /images/edits (multipart: model,
  prompt, n, size, image); POST /videos (multipart: model, prompt, seconds, size,
  input_reference? -> {"id", "object": "video", "status": "queued"}); GET /videos/{id}
  (queued, in_progress with progress, then completed; or failed with error.message);
  GET /videos/{id}/content (the MP4 bytes).
- Gemini (base {url}/gemini): POST /v1beta/models/{model}:generateContent (one image in
  candidates[0].content.parts[].inlineData, usageMetadata); POST
  /v1beta/models/{model}:predictLongRunning -> {"name": "models/{model}/operations/{id}"};
  GET /v1beta/models/{model}/operations/{id} ({"done": true, "response":
  {"generateVideoResponse": {"generatedSamples": [{"video": {"uri"}}]}}} when done); the
  uri, /gemini/v1beta/files/{id}:download, answers 302 to the file on another origin.
- fal (base {url}/fal): POST /fal/{model} -> {"request_id", "status_url", "response_url",
  "cancel_url"}; GET .../requests/{id}/status (IN_QUEUE, IN_PROGRESS, COMPLETED); GET
  .../requests/{id} (the model's output: {"images": [{"url"}]} or {"video": {"url"}});
  files are served from the other loopback name (http://localhost:port/cdn/...), so the
  key must not reach them.

A job is done after `polls` status polls (default 3), never while `hold` is set; every
request is recorded in `seen` (method, path, the key header, the form or JSON body).
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import BodyPartReader, web

from tests.fakes.loopback import serve_on_loopback


def png(width: int = 2, height: int = 2, shade: int = 0) -> bytes:
    """A real, valid RGB PNG of one colour."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + bytes([shade, 128, 255 - shade]) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


MP4 = b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom" + b"\x00" * 64


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    key: str  # the Authorization or x-goog-api-key header ("" when none)
    body: dict[str, Any]


@dataclass
class Job:
    api: str
    polls: int = 0
    kind: str = "video"  # or "image" (fal)
    n: int = 1


@dataclass
class FakeMedia:
    """The fake (see the module docstring); `async with FakeMedia() as fake:`."""

    polls: int = 3
    hold: bool = False  # jobs never finish while set
    fail: str = ""  # jobs fail with this message when done
    side: int = 2  # OpenAI's images are PNGs this many pixels square
    cut: int = 0  # ... and, when set, cut to this many bytes (a truncated file)
    seen: list[Seen] = field(default_factory=list)
    jobs: dict[str, Job] = field(default_factory=dict)
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def submits(self, path_part: str) -> list[Seen]:
        """The POSTs whose path contains `path_part`."""
        return [s for s in self.seen if s.method == "POST" and path_part in s.path]

    def polled(self, path_part: str) -> int:
        return len([s for s in self.seen if s.method == "GET" and path_part in s.path])

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/images/generations", self._openai_generations)
        app.router.add_post("/v1/images/edits", self._openai_edits)
        app.router.add_post("/v1/videos", self._openai_video)
        app.router.add_get("/v1/videos/{id}", self._openai_video_status)
        app.router.add_get("/v1/videos/{id}/content", self._openai_video_content)
        app.router.add_post("/gemini/v1beta/models/{call}", self._gemini_call)
        app.router.add_get("/gemini/v1beta/models/{model}/operations/{id}", self._gemini_op)
        app.router.add_get("/gemini/v1beta/files/{file}", self._gemini_file)
        app.router.add_get("/fal/{app}/{path:.*}/requests/{id}/status", self._fal_status)
        app.router.add_get("/fal/{app}/{path:.*}/requests/{id}", self._fal_result)
        app.router.add_post("/fal/{model:.+}", self._fal_submit)
        app.router.add_get("/cdn/{name}", self._cdn)
        self._runner, self.port = await serve_on_loopback(app)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> FakeMedia:
        await self.start()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- what every handler does ------------------------------------------------------

    async def _record(self, request: web.Request) -> dict[str, Any]:
        body: dict[str, Any] = {}
        kind = request.content_type
        if kind == "application/json":
            body = await request.json()
        elif kind == "multipart/form-data":
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                assert isinstance(part, BodyPartReader)
                data = await part.read()
                name = part.name or ""
                if part.filename:
                    body[name] = {
                        "filename": part.filename,
                        "type": part.headers.get("Content-Type", ""),
                        "size": len(data),
                    }
                else:
                    body[name] = data.decode()
        key = request.headers.get("Authorization") or request.headers.get("x-goog-api-key") or ""
        self.seen.append(Seen(request.method, request.path, key, body))
        return body

    def _progress(self, job_id: str) -> str:
        """running, done or failed, counting this poll."""
        job = self.jobs[job_id]
        job.polls += 1
        if self.hold or job.polls < self.polls:
            return "running"
        return "failed" if self.fail else "done"

    # -- OpenAI -----------------------------------------------------------------------

    async def _openai_generations(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        return _images_answer(int(body.get("n", 1)), self.side, self.cut)

    async def _openai_edits(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        if "image" not in body:
            return web.json_response({"error": {"message": "image is required"}}, status=400)
        return _images_answer(int(body.get("n", "1")), self.side, self.cut)

    async def _openai_video(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        if body.get("seconds") not in ("4", "8", "12"):
            return web.json_response(
                {"error": {"message": "seconds must be one of 4, 8, 12"}}, status=400
            )
        video = f"video_{len(self.jobs) + 1}"
        self.jobs[video] = Job("openai")
        return web.json_response(
            {"id": video, "object": "video", "model": body.get("model"), "status": "queued"}
        )

    async def _openai_video_status(self, request: web.Request) -> web.Response:
        await self._record(request)
        video = request.match_info["id"]
        if video not in self.jobs:
            return web.json_response({"error": {"message": "No such video"}}, status=404)
        state = self._progress(video)
        answer: dict[str, Any] = {"id": video, "object": "video"}
        if state == "running":
            answer.update(status="in_progress", progress=25)
        elif state == "failed":
            answer.update(status="failed", error={"code": "x", "message": self.fail})
        else:
            answer.update(status="completed", progress=100)
        return web.json_response(answer)

    async def _openai_video_content(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.Response(body=MP4, content_type="video/mp4")

    # -- Gemini -----------------------------------------------------------------------

    async def _gemini_call(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        model, _, method = request.match_info["call"].partition(":")
        if method == "generateContent":
            modalities = body.get("generationConfig", {}).get("responseModalities")
            if modalities != ["IMAGE"]:
                return web.json_response({"error": {"message": "no image modality"}}, status=400)
            encoded = base64.b64encode(png(shade=len(self.seen))).decode()
            return web.json_response(
                {
                    "candidates": [
                        {
                            "content": {
                                "role": "model",
                                "parts": [
                                    {"inlineData": {"mimeType": "image/png", "data": encoded}}
                                ],
                            },
                            "finishReason": "STOP",
                        }
                    ],
                    "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 1290},
                }
            )
        if method == "predictLongRunning":
            operation = f"op{len(self.jobs) + 1}"
            self.jobs[operation] = Job("gemini")
            return web.json_response({"name": f"models/{model}/operations/{operation}"})
        return web.json_response({"error": {"message": "unknown method"}}, status=404)

    async def _gemini_op(self, request: web.Request) -> web.Response:
        await self._record(request)
        operation = request.match_info["id"]
        name = f"models/{request.match_info['model']}/operations/{operation}"
        state = self._progress(operation)
        if state == "running":
            return web.json_response({"name": name})
        if state == "failed":
            return web.json_response(
                {"name": name, "done": True, "error": {"code": 3, "message": self.fail}}
            )
        uri = f"{self.url}/gemini/v1beta/files/{operation}:download?alt=media"
        return web.json_response(
            {
                "name": name,
                "done": True,
                "response": {
                    "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta."
                    "PredictLongRunningResponse",
                    "generateVideoResponse": {"generatedSamples": [{"video": {"uri": uri}}]},
                },
            }
        )

    async def _gemini_file(self, request: web.Request) -> web.Response:
        await self._record(request)
        if not request.headers.get("x-goog-api-key"):
            return web.json_response({"error": {"message": "API key required"}}, status=403)
        raise web.HTTPFound(f"http://localhost:{self.port}/cdn/clip.mp4")

    # -- fal --------------------------------------------------------------------------

    async def _fal_submit(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        model = request.match_info["model"]
        app = "/".join(model.split("/")[:2])
        request_id = f"req-{len(self.jobs) + 1}"
        kind = "video" if "duration" in body else "image"
        self.jobs[request_id] = Job("fal", kind=kind, n=int(body.get("num_images", 1)))
        base = f"{self.url}/fal/{app}/requests/{request_id}"
        return web.json_response(
            {
                "request_id": request_id,
                "response_url": base,
                "status_url": f"{base}/status",
                "cancel_url": f"{base}/cancel",
            }
        )

    async def _fal_status(self, request: web.Request) -> web.Response:
        await self._record(request)
        request_id = request.match_info["id"]
        state = self._progress(request_id)
        if state == "running":
            return web.json_response({"status": "IN_PROGRESS", "request_id": request_id})
        answer: dict[str, Any] = {"status": "COMPLETED", "request_id": request_id}
        if state == "failed":
            answer["error"] = self.fail
        return web.json_response(answer)

    async def _fal_result(self, request: web.Request) -> web.Response:
        await self._record(request)
        job = self.jobs[request.match_info["id"]]
        cdn = f"http://localhost:{self.port}/cdn"
        if job.kind == "video":
            return web.json_response({"video": {"url": f"{cdn}/clip.mp4"}})
        images = [{"url": f"{cdn}/image{i}.png", "content_type": "image/png"} for i in range(job.n)]
        return web.json_response({"images": images, "seed": 42})

    async def _cdn(self, request: web.Request) -> web.Response:
        await self._record(request)
        name = request.match_info["name"]
        if name.endswith(".mp4"):
            return web.Response(body=MP4, content_type="video/mp4")
        return web.Response(body=png(shade=7), content_type="image/png")


def _images_answer(n: int, side: int, cut: int) -> web.Response:
    images = [png(side, side, shade=i)[: cut or None] for i in range(n)]
    data = [{"b64_json": base64.b64encode(image).decode()} for image in images]
    usage = {"input_tokens": 12, "output_tokens": 4160 * n, "total_tokens": 12 + 4160 * n}
    return web.Response(
        text=json.dumps({"created": 1, "data": data, "usage": usage}),
        content_type="application/json",
    )
