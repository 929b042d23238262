"""No orphans: a Habakkuk killed with -9 while its agent had a desktop leaves an Xvfb (and
the apps on it) behind, and the next start kills them, counted from the process table."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from habakkuk.engine.computer_config import ComputerConfig
from habakkuk.engine.home import Home
from habakkuk.tools.computer.xvfb import read_state, reap_desktops
from tests.conftest import OpenRuntime, mock_config
from tests.helpers import eventually, tool_context

from .xdesk import alive, bench, needs_x, xvfb_pids

pytestmark = needs_x

CONFIG = mock_config() + "    toolsets: [core, computer, computer-open]\n"

# A Habakkuk whose agent opened an app on its desktop, then waits to be killed.
CHILD = """
import asyncio, sys
from pathlib import Path
from habakkuk.engine.computer_config import ComputerConfig
from habakkuk.engine.home import Home
from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.runtime import Runtime
from tests.helpers import tool_context

async def main():
    home = Home(Path(sys.argv[1]))
    runtime = await Runtime.open(home)
    ctx = tool_context(home.root, mode="full")
    use = ToolUseBlock("c1", "computer_open", {"app": "xeyes", "screenshot": False})
    result = await runtime.tools.call(use, ctx, {"computer_open"})
    print(result.text, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


async def test_the_next_start_kills_the_desktop_a_killed_habakkuk_left(
    home: Home, runtime_factory: OpenRuntime
) -> None:
    home.config_path.write_text(CONFIG, encoding="utf-8")
    before = xvfb_pids()
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, str(home.root),
        stdout=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.getcwd()},
    )  # fmt: skip
    assert child.stdout is not None
    said = (await asyncio.wait_for(child.stdout.readline(), 60)).decode()
    assert "xeyes started" in said, said
    state = read_state(home.root, "main")
    assert state is not None and state.owner == child.pid
    members = [p for p in _group_members(state.pid)]
    assert state.pid in xvfb_pids() - before and len(members) >= 2  # Xvfb and xeyes

    child.send_signal(signal.SIGKILL)
    await child.wait()
    assert state.pid in xvfb_pids()  # the orphan: still running with its owner gone
    assert all(alive(pid) for pid in members)

    await runtime_factory(CONFIG)  # the next start
    await eventually(lambda: state.pid not in xvfb_pids(), what="the orphaned Xvfb killed")
    await eventually(lambda: not any(alive(pid) for pid in members), what="its apps killed")
    assert read_state(home.root, "main") is None
    assert not Path(state.auth).exists()
    assert not Path(f"/tmp/.X{state.display}-lock").exists()


def _group_members(group: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == group:
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


async def test_a_desktop_whose_habakkuk_still_runs_is_left_alone(tmp_path: Path) -> None:
    async with bench(tool_context(tmp_path), ComputerConfig()) as b:
        await b.call("computer_screenshot")
        state = read_state(tmp_path, "main")
        assert state is not None
        assert reap_desktops(tmp_path) == []  # its owner (this process) is alive
        assert state.pid in xvfb_pids()
