"""MCP servers built with the official SDK, run by the tests as real processes.

    python mcp_servers.py stdio basic        # the tool zoo below, over stdio
    python mcp_servers.py stdio crash        # exits before answering anything
    python mcp_servers.py stdio hang         # never answers the handshake
    python mcp_servers.py http PORTFILE      # the tool zoo over Streamable HTTP on 127.0.0.1

The HTTP mode binds port 0 and writes the port it got to PORTFILE.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import sys
import time
import zlib
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import ImageContent, TextContent


def png(width: int, height: int, rows: int | None = None) -> bytes:
    """A PNG of `width` x `height` grey pixels; with `rows`, its header claims `height` but
    its data holds only that many rows (a bomb's shape: a few bytes claiming many pixels)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    pixels = zlib.compress((b"\x00" + b"\x80" * width) * (height if rows is None else rows))
    body = chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


PNG = png(1, 1)


def image_content(data: bytes, mime: str = "image/png") -> ImageContent:
    return ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=mime)


def build() -> MCPServer:
    server = MCPServer("test-zoo")

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="The names of the environment variables this server got.")
    def env_names() -> str:
        return json.dumps(sorted(os.environ))

    @server.tool(description="Add two numbers (structured result).")
    def add(a: int, b: int) -> dict[str, Any]:
        return {"sum": a + b}

    @server.tool(description="A tiny image.")
    def picture() -> Image:
        return Image(data=PNG, format="png")

    @server.tool(description="A chart too big to show as it is, among text.")
    def chart() -> list[TextContent | ImageContent]:
        return [
            TextContent(type="text", text="the chart:"),
            image_content(png(3000, 1500)),
            TextContent(type="text", text="end of chart"),
        ]

    @server.tool(description="Images a model must never be shown.")
    def bad_images() -> list[TextContent | ImageContent]:
        return [
            TextContent(type="text", text="three tries:"),
            image_content(png(30_000, 30_000, rows=1)),  # claims 900 megapixels
            image_content(png(64, 64)[:50]),  # cut off in its pixel data
            image_content(b"%PDF-1.7 not an image", "image/jpeg"),  # a type that lies
            image_content(png(8, 8)),
        ]

    @server.tool(description="Two MiB of text.")
    def huge() -> str:
        return "x" * (2 * 1024 * 1024)

    @server.tool(description="Always fails.")
    def broken() -> str:
        raise ToolError("the widget is broken")

    @server.tool(description="Never returns.")
    def stall() -> str:
        time.sleep(3600)
        return "unreachable"

    @server.tool(description="Kills the server in the middle of the call.")
    def die() -> str:
        sys.stderr.write("fatal: dying on purpose\n")
        sys.stderr.flush()
        os._exit(3)

    @server.tool(description="Starts a helper process that would outlive a careless client.")
    def spawn_helper() -> str:
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(3600)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return str(child.pid)

    @server.tool(name="dotted.name", description="Sanitizes like dotted_name.")
    def dotted_a() -> str:
        return "dotted.name"

    @server.tool(name="dotted_name", description="Already safe.")
    def dotted_b() -> str:
        return "dotted_name"

    @server.tool(name="a_tool_with_a_name_so_long_that_the_prefix_pushes_it_past_sixty_four")
    def long_named() -> str:
        return "long"

    return server


def _require_header(app: Any, value: str) -> Any:
    """Refuse requests whose Authorization header is not `value` (checks header passing)."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != value:
                await send({"type": "http.response.start", "status": 403, "headers": []})
                await send({"type": "http.response.body", "body": b"forbidden"})
                return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    transport, arg = sys.argv[1], sys.argv[2]
    if transport == "stdio":
        if arg == "crash":
            sys.stderr.write("boom: missing configuration\n")
            sys.exit(2)
        if arg == "hang":
            time.sleep(3600)
            return
        build().run("stdio")
        return
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)  # connections wait in the backlog until uvicorn accepts them
    port = sock.getsockname()[1]
    app = build().streamable_http_app(host="127.0.0.1")
    required = os.environ.get("TEST_REQUIRED_AUTH")
    if required:
        app = _require_header(app, required)
    config = uvicorn.Config(app, log_level="warning")
    server = uvicorn.Server(config)
    with open(arg + ".tmp", "w") as handle:
        handle.write(str(port))
    os.replace(arg + ".tmp", arg)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
