"""GET /api/chat/{conversation}/files/{id}: a file the agent sent to a web conversation.

The API's token is checked by the conventions middleware (constant time) as for every
other path. A file is served only under the conversation it was sent to: an unknown
id, another conversation's file or a file whose copy retention removed are all 404.
The name in Content-Disposition is written so no header can be injected (an ASCII
fallback with every other character replaced, and the real name percent-encoded in
`filename*`); the Content-Type is the stored media type with `nosniff`, images shown
inline and every other type a download, in a sandbox so nothing in it runs.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from urllib.parse import quote

from aiohttp import web

from habakkuk.engine.blobs import BlobNotFound

from .chat import check_conversation
from .errors import ApiError
from .served import server_of

# Shown in the page (an <img>); any other type is offered as a download.
INLINE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_FILE_ID = re.compile(r"file_[0-9a-f]{24}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._ ()+-]")


def content_disposition(name: str, inline: bool) -> str:
    """The Content-Disposition of a file named `name`: only safe ASCII in the plain
    `filename`, the exact name percent-encoded (RFC 6266/5987) in `filename*`."""
    plain = _UNSAFE.sub("_", name).strip(" .") or "file"
    kind = "inline" if inline else "attachment"
    return f"{kind}; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe='')}"


def _is_file(path: Path) -> bool:
    return path.is_file()


async def chat_file(request: web.Request) -> web.StreamResponse:
    """GET /api/chat/{conversation}/files/{id}: the file's bytes."""
    server = server_of(request)
    conversation = check_conversation(request.match_info["conversation"])
    file_id = request.match_info["file"]
    found = None
    if _FILE_ID.fullmatch(file_id):
        found = await server.web_store().file(conversation, file_id)
    if found is None:
        raise ApiError(404, f"conversation {conversation!r} has no file {file_id!r}")
    path = Path(found.path)
    if not await asyncio.to_thread(_is_file, path):
        try:
            # Stored by another node of a PostgreSQL home: its copy, fetched here.
            path = await server.runtime.blobs.ensure_local(path)
        except BlobNotFound:
            raise ApiError(
                404, f"the file {found.name!r} is no longer stored (retention)"
            ) from None
    inline = found.media_type in INLINE_TYPES
    return web.FileResponse(
        path,
        headers={
            "Content-Type": found.media_type,
            "Content-Disposition": content_disposition(found.name, inline),
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox; default-src 'none'",
            "Cache-Control": "private, max-age=3600",
        },
    )


def setup(app: web.Application) -> None:
    """Register the chat's file route."""
    app.router.add_get("/api/chat/{conversation}/files/{file}", chat_file)
