"""What the node tests share: pairing over HTTP, a `habakkuk node run` process."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.processes import BOUND
from tests.server.conftest import Served

Process = asyncio.subprocess.Process


async def new_code(served: Served) -> str:
    """A one-time code from POST /api/nodes/pair."""
    body = await served.post_json("/api/nodes/pair", {}, status=200)
    assert isinstance(body["code"], str) and len(body["code"]) == 10
    return str(body["code"])


async def redeem(served: Served, code: str, name: str, status: int = 200) -> dict[str, str]:
    """POST /nodes/pair (no API token: devices carry their code)."""
    async with served.client.post(
        served.url + "/nodes/pair", json={"code": code, "name": name, "caps": []}
    ) as response:
        assert response.status == status, await response.text()
        body: dict[str, str] = await response.json()
        return body


def stub_program(folder: Path, name: str, record: Path) -> None:
    """An executable `name` in `folder` that appends its arguments to `record` (the
    device's notify-send, whose desktop daemon does not run here)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> "{record}"\n', encoding="utf-8")
    script.chmod(0o755)


async def node_run(device_home: Path, *args: str, path_first: Path | None = None) -> Process:
    """`habakkuk node run ARGS` as a device would run it, on its own home."""
    env = {**os.environ, "HABAKKUK_HOME": str(device_home), "PYTHONUNBUFFERED": "1"}
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env.get('PATH', '')}"
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "habakkuk.cli", "node", "run", *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def until_line(process: Process, words: str) -> list[str]:
    """Read the node's stdout up to a line with `words`; the lines read."""
    assert process.stdout is not None
    lines: list[str] = []
    while not any(words in line for line in lines):
        line = await asyncio.wait_for(process.stdout.readline(), BOUND)
        if not line:
            err = await process.stderr.read() if process.stderr is not None else b""
            raise AssertionError("node run exited: " + "".join(lines) + err.decode())
        lines.append(line.decode())
    return lines


async def cli(home: Path, *args: str) -> tuple[int, str, str]:
    """Run `habakkuk ARGS` on `home` in a second process: exit code, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "habakkuk.cli", *args,
        env={**os.environ, "HABAKKUK_HOME": str(home)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), BOUND)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()
