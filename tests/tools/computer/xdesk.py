"""A real desktop for the computer tests: Xvfb, xdotool and ImageMagick from Debian, and
xev (x11-utils), whose report of every event it receives says where a click landed, which
keys arrived and how the wheel turned."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from habakkuk.engine.computer_config import ComputerConfig
from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.toolkit.registry import CallResult, ToolContext, ToolRegistry
from habakkuk.tools.computer.desk import Desk, Desktops
from habakkuk.tools.computer.native import NativeComputerTool
from habakkuk.tools.computer.tools import computer_tools, open_tool
from tests.helpers import eventually

NEEDED = {"Xvfb": "xvfb", "xdotool": "xdotool", "import": "imagemagick", "xev": "x11-utils",
          "xeyes": "x11-apps"}  # fmt: skip
MISSING = [package for program, package in NEEDED.items() if shutil.which(program) is None]
needs_x = pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)} (apt-get)")

_ROOT = re.compile(r"root:\((-?\d+),(-?\d+)\)")
_KEYSYM = re.compile(r"keysym 0x[0-9a-f]+, ([^)]+)\)")
_BUTTON = re.compile(r"button (\d+)")


def xvfb_pids() -> set[int]:
    """The Xvfb processes running now, from the process table."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if argv and os.path.basename(argv[0]) == b"Xvfb":
                    found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


@dataclass
class Xev:
    """xev on the desk: its window at a known place, and what it reported."""

    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join(self.lines)

    def presses(self) -> list[tuple[int, int]]:
        """Where each button press landed, in root (input) coordinates."""
        found, pressing = [], False
        for line in self.lines:
            if line.startswith("ButtonPress"):
                pressing = True
            elif pressing and (match := _ROOT.search(line)):
                found.append((int(match.group(1)), int(match.group(2))))
                pressing = False
        return found

    def buttons(self) -> list[int]:
        found, pressing = [], False
        for line in self.lines:
            if line.startswith("ButtonPress"):
                pressing = True
            elif pressing and (match := _BUTTON.search(line)):
                found.append(int(match.group(1)))
                pressing = False
        return found

    def keysyms(self) -> list[str]:
        """The keysyms pressed, in order."""
        found, pressing = [], False
        for line in self.lines:
            if line.startswith("KeyPress"):
                pressing = True
            elif pressing and (match := _KEYSYM.search(line)):
                found.append(match.group(1))
                pressing = False
        return found


@dataclass
class Bench:
    """The tools on a desktop of their own, and what a test needs around them."""

    tools: ToolRegistry
    desktops: Desktops
    ctx: ToolContext
    settings: ComputerConfig
    calls: int = 0
    # The programs a test started on the desk (xev): ended and reaped with the bench, so
    # no process or pipe outlives its test (an unreaped one warns in a later test).
    spawned: list[asyncio.subprocess.Process] = field(default_factory=list)
    readers: list[asyncio.Task[None]] = field(default_factory=list)

    async def call(self, name: str, **args: object) -> CallResult:
        self.calls += 1
        use = ToolUseBlock(f"call_{self.calls}", name, dict(args))
        allowed = {t.name for t in self.tools.tools_for(["computer", "computer-open"])}
        allowed.add("computer")  # the native tool (Anthropic's), on the same desk
        return await self.tools.call_with_media(use, self.ctx, allowed)

    async def desk(self) -> Desk:
        return await self.desktops.desk(self.ctx.home, self.ctx.agent)

    async def env(self) -> dict[str, str]:
        desk = await self.desk()
        assert desk.xvfb is not None
        return {"PATH": os.environ["PATH"], **desk.xvfb.state.env}

    async def xev(self, geometry: str = "600x400+100+100") -> Xev:
        env = await self.env()
        process = await asyncio.create_subprocess_exec(
            "xev", "-geometry", geometry, "-event", "keyboard", "-event", "button",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env,
        )  # fmt: skip
        xev = Xev(process)
        self.spawned.append(process)

        async def read() -> None:
            assert process.stdout is not None
            async for line in process.stdout:
                xev.lines.append(line.decode("utf-8", "replace").strip())

        self.readers.append(asyncio.get_running_loop().create_task(read()))
        await eventually(lambda: self.window("Event Tester"), what="xev's window")
        return xev

    def window(self, name: str) -> bool:
        """Whether a window of that name is on the desk (xdotool search)."""
        env = {"PATH": os.environ["PATH"], **self.desktops_env()}
        done = subprocess.run(["xdotool", "search", "--name", name], env=env, capture_output=True)
        return done.returncode == 0 and bool(done.stdout.strip())

    def xdotool(self, *args: str) -> str:
        env = {"PATH": os.environ["PATH"], **self.desktops_env()}
        done = subprocess.run(["xdotool", *args], env=env, capture_output=True, check=True)
        return done.stdout.decode()

    def desktops_env(self) -> dict[str, str]:
        desk = self.desktops.started(self.ctx.agent)
        assert desk is not None and desk.xvfb is not None
        return desk.xvfb.state.env


@contextlib.asynccontextmanager
async def bench(ctx: ToolContext, settings: ComputerConfig) -> AsyncIterator[Bench]:
    """The computer tools of `ctx`'s agent on an Xvfb of their own, stopped afterwards."""
    desktops = Desktops(lambda agent: settings)
    tools = ToolRegistry()
    for tool in computer_tools(desktops, lambda agent: settings):
        tools.register(tool, "computer")
    tools.register(open_tool(desktops, lambda agent: settings), "computer-open")
    tools.register_native(NativeComputerTool(desktops, lambda agent: settings))
    tools.on_close(desktops.close)
    made = Bench(tools, desktops, ctx, settings)
    try:
        yield made
    finally:
        for process in made.spawned:
            if process.returncode is None:
                process.kill()
            await process.wait()
        await asyncio.gather(*made.readers, return_exceptions=True)
        await tools.close()
