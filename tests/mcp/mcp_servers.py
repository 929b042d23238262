"""MCP servers built with the official SDK, run by the tests as real processes.

    python mcp_servers.py stdio basic        # the tool zoo below, over stdio
    python mcp_servers.py stdio crash        # exits before answering anything
    python mcp_servers.py stdio hang         # never answers the handshake
    python mcp_servers.py http PORTFILE      # the tool zoo over Streamable HTTP on 127.0.0.1

The HTTP mode binds port 0 and writes the port it got to PORTFILE.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


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
