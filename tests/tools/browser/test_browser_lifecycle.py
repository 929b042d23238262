"""A browser's life: a crash mid-call, kill -9 of its Habakkuk, idle closing, a stale one
killed at start, and mode connect closing only its own tabs. Real Chromium processes,
counted from the process table."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from habakkuk.engine.browser_config import BrowserConfig
from habakkuk.engine.toolkit.registry import ToolError
from habakkuk.tools.browser.launcher import PID_FILE
from tests.helpers import PROCESS_BOUND, eventually, eventually_sync, tool_context
from tests.tools.browser.conftest import CHROMIUM, Site, Tools, make_fleet, needs_chromium

pytestmark = [needs_chromium, pytest.mark.timeout(240)]


def browsers_on(profile: Path) -> list[int]:
    """Pids of processes whose command line names `profile` as their user data dir."""
    wanted = f"--user-data-dir={profile}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if wanted in command and state != "Z":
            found.append(int(entry))
    return found


async def test_a_crash_mid_call_is_a_clear_error_and_the_next_call_relaunches(
    tools: Tools, site: Site
) -> None:
    await tools("browser_navigate", url=site.url("/other"))
    browser = tools.fleet.running("main")
    assert browser is not None and browser.pid is not None
    waiting = asyncio.create_task(tools("browser_wait", text="never there", seconds=60))
    await eventually(lambda: browser.alive, what="the call to be under way")
    os.killpg(browser.pid, signal.SIGKILL)
    with pytest.raises(ToolError, match="the browser closed during the call"):
        await waiting
    again = await tools("browser_navigate", url=site.url("/form"))
    assert "a new one was started and earlier tabs are gone" in again.text
    assert "Booking" in again.text


async def test_idle_browsers_close_and_shutdown_leaves_none(tmp_path: Path, site: Site) -> None:
    settings = BrowserConfig(allow_private=["127.0.0.1"], idle_timeout=0.2)
    fleet = make_fleet(tmp_path, settings)
    tools = Tools(fleet, tool_context(tmp_path))
    profile = tmp_path / "browser" / "main"
    await tools("browser_navigate", url=site.url("/other"))
    assert browsers_on(profile)
    await eventually(lambda: fleet.running("main") is None, what="the idle browser to close")
    eventually_sync(lambda: not browsers_on(profile), what="its processes to end")
    await tools("browser_navigate", url=site.url("/other"))
    await fleet.close()
    eventually_sync(lambda: not browsers_on(profile), what="the processes to end at shutdown")


HOLDER = """
import asyncio, sys
from pathlib import Path
from habakkuk.tools.browser.fleet import launch_browser
from habakkuk.tools.browser.guard import UrlGuard

async def main():
    browser = await launch_browser(sys.argv[1], Path(sys.argv[2]), UrlGuard())
    print(browser.pid, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def test_kill_9_of_habakkuk_leaves_no_browser(tmp_path: Path) -> None:
    profile = tmp_path / "profile"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(CHROMIUM), str(profile)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert holder.stdout is not None
        pid = int(holder.stdout.readline())
        assert pid in browsers_on(profile)
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        eventually_sync(
            lambda: not browsers_on(profile), what="the browser to exit", timeout=PROCESS_BOUND
        )
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_a_hung_browser_left_on_the_profile_is_killed_at_the_next_start(tmp_path: Path) -> None:
    from habakkuk.tools.browser.launcher import kill_stale

    profile = tmp_path / "profile"
    profile.mkdir()
    # A browser that ignores its pipe: started with a debugging port instead.
    hung = subprocess.Popen(
        [str(CHROMIUM), "--headless", "--no-sandbox", f"--user-data-dir={profile}",
         "--remote-debugging-port=0", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        (profile / PID_FILE).write_text(f"{hung.pid}\n")
        eventually_sync(lambda: hung.pid in browsers_on(profile), what="the browser to run")
        assert kill_stale(profile)
        eventually_sync(lambda: not browsers_on(profile), what="the stale browser to end")
    finally:
        hung.kill()
        hung.wait()


@pytest.fixture
async def outside_browser() -> AsyncIterator[str]:
    """A Chromium someone else runs, with a DevTools port: its http:// address."""
    profile = Path(tempfile.mkdtemp(prefix="habakkuk-outside-"))
    process = await asyncio.create_subprocess_exec(
        str(CHROMIUM), "--headless", "--no-sandbox", f"--user-data-dir={profile}",
        "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1", "about:blank",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    port_file = profile / "DevToolsActivePort"
    try:
        await eventually(port_file.exists, what="DevToolsActivePort")
        await eventually(lambda: len(port_file.read_text().splitlines()) >= 2, what="its port")
        yield f"http://127.0.0.1:{port_file.read_text().split()[0]}"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


async def _page_urls(address: str) -> list[str]:
    async with aiohttp.ClientSession() as session, session.get(f"{address}/json/list") as r:
        return [t["url"] for t in json.loads(await r.text()) if t["type"] == "page"]


async def test_connect_mode_works_in_its_own_tabs_and_closes_only_them(
    tmp_path: Path, site: Site, outside_browser: str
) -> None:
    settings = BrowserConfig(mode="connect", cdp_url=outside_browser, allow_private=["127.0.0.1"])
    fleet = make_fleet(tmp_path, settings)
    tools = Tools(fleet, tool_context(tmp_path))
    try:
        opened = await tools("browser_navigate", url=site.url("/form"))
        assert "Booking" in opened.text
        blocked = await tools("browser_navigate", url="http://localhost:9/")
        assert blocked.text.startswith("[blocked: ")
        assert sorted(await _page_urls(outside_browser)) == ["about:blank", site.url("/form")]
        listed = await tools("browser_tabs", action="list")
        assert "other tabs of this browser" in listed.text
        # A blank tab's title is "about:blank" once Chromium has named it, empty before.
        assert re.search(r"\n  0: (about:blank|\(no title\)) — about:blank", listed.text)
        await tools("browser_tabs", action="attach", index=0)
        await tools("browser_navigate", url=site.url("/other"))
    finally:
        await fleet.close()

    # Chromium lists a closed tab a moment longer than it takes to answer closeTarget.
    async def owners_tab_alone() -> bool:
        return await _page_urls(outside_browser) == [site.url("/other")]

    await eventually(owners_tab_alone, what="the owner's tab, alone")
