"""The computer toolset on a real Xvfb driven by xdotool, captured by ImageMagick, with
xev as the program on the desk: clicks land where the model pointed in the scaled
screenshot, typing and keys arrive, apps open and end with the desktop, the display takes
only Habakkuk's cookie, and the per-turn limit and confirm_apps hold."""

from __future__ import annotations

import io
import os
import stat
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from habakkuk.engine.computer_config import ComputerConfig
from habakkuk.engine.toolkit.approvals import Answer, ApprovalDecision, ApprovalRequest
from habakkuk.engine.toolkit.reviewer import ReviewerApprover
from habakkuk.tools.computer.xvfb import read_state
from tests.helpers import eventually, tool_context

from .xdesk import alive, bench, needs_x

pytestmark = needs_x
BIG = ComputerConfig(size="1600x1000")  # shown to the model at 1366x854


async def test_a_screenshot_is_scaled_to_1366_px_shown_as_media_and_taints_the_turn(
    tmp_path: Path,
) -> None:
    ctx = tool_context(tmp_path)
    async with bench(ctx, BIG) as b:
        done = await b.call("computer_screenshot")
        assert not done.result.is_error, done.result.text
        assert "1366x854 (captured at 1600x1000, scaled)" in done.result.text
        assert "untrusted" in done.result.text
        assert ctx.taint.reason == "computer_screenshot"
        (block,) = done.media
        assert block.media_type == "image/png" and block.blob
        with Image.open(io.BytesIO(Path(block.blob).read_bytes())) as image:
            assert image.size == (1366, 854)


async def test_a_click_lands_where_the_model_pointed_in_the_scaled_screenshot(
    tmp_path: Path,
) -> None:
    async with bench(tool_context(tmp_path), BIG) as b:
        xev = await b.xev("600x400+100+100")
        shown = await b.call("computer_screenshot")
        assert not shown.result.is_error
        done = await b.call("computer_click", x=300, y=250, screenshot=False)
        assert not done.result.is_error and done.media == []
        # (300.5 * 1600 / 1366, 250.5 * 1000 / 854): the middle of the shown pixel
        await eventually(lambda: xev.presses() == [(351, 293)], what=f"the click: {xev.text()}")
        await b.call("computer_click", x=300, y=250, button="right", screenshot=False)
        await b.call("computer_click", x=301, y=251, count=2, screenshot=False)
        await eventually(lambda: xev.buttons() == [1, 3, 1, 1], what=f"clicks: {xev.buttons()}")
        outside = await b.call("computer_click", x=1366, y=10)
        assert outside.result.is_error and "outside the screenshot" in outside.result.text


async def test_an_action_before_any_screenshot_learns_the_geometry_unseen(tmp_path: Path) -> None:
    async with bench(tool_context(tmp_path), BIG) as b:
        xev = await b.xev("600x400+100+100")
        done = await b.call("computer_click", x=400, y=300, screenshot=False)
        assert not done.result.is_error and done.media == []
        await eventually(lambda: xev.presses() == [(469, 351)], what="the click in xev")


async def test_typing_keys_and_the_wheel_reach_the_program_under_the_pointer(
    tmp_path: Path,
) -> None:
    async with bench(tool_context(tmp_path), BIG) as b:
        xev = await b.xev("600x400+100+100")
        await b.call("computer_move", x=300, y=250, screenshot=False)
        typed = await b.call("computer_type", text="Hi there", screenshot=False)
        assert typed.result.text == "Typed 8 characters."
        await b.call("computer_key", keys="ctrl+l", screenshot=False)
        await b.call("computer_key", keys="Return", screenshot=False)
        want = ["H", "i", "space", "t", "h", "e", "r", "e", "Control_L", "l", "Return"]
        await eventually(
            lambda: [k for k in xev.keysyms() if k not in ("Shift_L",)] == want,
            what=f"the keys: {xev.keysyms()}",
        )
        await b.call("computer_scroll", x=300, y=250, direction="down", amount=3, screenshot=False)
        await eventually(lambda: xev.buttons()[-3:] == [5, 5, 5], what=f"wheel: {xev.buttons()}")
        bad = await b.call("computer_key", keys="ctrl+launchrocket")
        assert bad.result.is_error and "unknown key" in bad.result.text


async def test_the_pointer_query_and_zoom_use_the_shown_image(tmp_path: Path) -> None:
    async with bench(tool_context(tmp_path), BIG) as b:
        await b.call("computer_move", x=500, y=300, screenshot=False)
        where = await b.call("computer_cursor")
        assert where.result.text == "The pointer is at (500, 300)."
        zoom = await b.call("computer_zoom", x0=0, y0=0, x1=100, y1=50)
        (block,) = zoom.media
        with Image.open(io.BytesIO(Path(block.blob).read_bytes())) as image:
            assert image.size == (117, 59)  # 100 x 50 shown pixels at full resolution


async def test_an_opened_app_runs_on_the_desk_and_ends_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-apps")
    async with bench(tool_context(tmp_path), ComputerConfig()) as b:
        opened = await b.call("computer_open", app="xeyes", args=["-geometry", "200x200+10+10"])
        assert not opened.result.is_error, opened.result.text
        assert "xeyes started" in opened.result.text and len(opened.media) == 1
        pid = int(opened.result.text.split("(pid ")[1].split(")")[0])
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert b"OPENAI_API_KEY=sk-not-for-apps" not in environ  # Habakkuk's keys stay home
        assert any(line.startswith(b"DISPLAY=:") for line in environ)
        await eventually(lambda: b.window("xeyes"), what="the xeyes window")
        desk = await b.desk()
        assert desk.xvfb is not None
        xvfb, group = desk.xvfb.state.pid, os.getpgid(desk.xvfb.state.pid)
        members = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _group(p) == group]
        assert len(members) >= 2  # Xvfb and xeyes
        missing = await b.call("computer_open", app="no-such-program-here")
        assert missing.result.is_error and "no such program" in missing.result.text
    assert not alive(xvfb)
    await eventually(lambda: not any(alive(int(p.name)) for p in members), what="xeyes gone")
    assert read_state(tmp_path, "main") is None
    assert not (tmp_path / "computer" / "main.xauth").exists()


def _group(proc: Path) -> int | None:
    try:
        return os.getpgid(int(proc.name))
    except OSError:
        return None


async def test_the_display_takes_only_the_cookie_and_no_tcp(tmp_path: Path) -> None:
    async with bench(tool_context(tmp_path), ComputerConfig()) as b:
        await b.call("computer_screenshot")
        state = read_state(tmp_path, "main")
        assert state is not None and state.display >= 99
        argv = Path(f"/proc/{state.pid}/cmdline").read_bytes().split(b"\0")
        assert b"-nolisten" in argv and argv[argv.index(b"-nolisten") + 1] == b"tcp"
        folder, auth = tmp_path / "computer", Path(state.auth)
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert stat.S_IMODE(auth.stat().st_mode) == 0o600
        assert stat.S_IMODE((folder / "main.json").stat().st_mode) == 0o600
        path = os.environ["PATH"]
        refused = subprocess.run(
            ["xdotool", "getdisplaygeometry"],
            env={"PATH": path, "DISPLAY": f":{state.display}", "XAUTHORITY": "/dev/null"},
            capture_output=True,
        )
        assert refused.returncode != 0  # no cookie, no connection
        let_in = subprocess.run(
            ["xdotool", "getdisplaygeometry"], env={"PATH": path, **state.env}, capture_output=True
        )
        assert let_in.stdout.split() == [b"1280", b"800"]


async def test_a_second_agent_gets_the_next_free_display(tmp_path: Path) -> None:
    async with (
        bench(tool_context(tmp_path, agent="one"), ComputerConfig()) as one,
        bench(tool_context(tmp_path, agent="two"), ComputerConfig()) as two,
    ):
        await one.call("computer_screenshot")
        await two.call("computer_screenshot")
        first, second = read_state(tmp_path, "one"), read_state(tmp_path, "two")
        assert first is not None and second is not None
        assert first.display != second.display and first.pid != second.pid


async def test_a_turn_takes_at_most_max_actions_and_waits_and_queries_are_free(
    tmp_path: Path,
) -> None:
    async with bench(tool_context(tmp_path), ComputerConfig(max_actions=2)) as b:
        assert not (await b.call("computer_move", x=1, y=1, screenshot=False)).result.is_error
        assert not (await b.call("computer_cursor")).result.is_error
        assert not (await b.call("computer_wait", seconds=0.01)).result.is_error
        assert not (await b.call("computer_move", x=2, y=2, screenshot=False)).result.is_error
        third = await b.call("computer_move", x=3, y=3, screenshot=False)
        assert third.result.is_error and "its 2 computer actions" in third.result.text
        assert not (await b.call("computer_cursor")).result.is_error
        b.ctx = tool_context(tmp_path)  # the next run of a turn counts afresh
        assert not (await b.call("computer_move", x=3, y=3, screenshot=False)).result.is_error


class Human:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.append(request)
        answer: Answer = "allow_session" if self.answer == "allow" else "deny"
        return ApprovalDecision(answer, by="terminal")


class Reviewer:
    """A reviewer that would allow anything (it must never be asked about these)."""

    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []

    async def review(self, request: ApprovalRequest) -> object:
        self.asked.append(request)
        raise AssertionError("a reviewer was asked about a confirm_apps call")


async def test_an_app_in_confirm_apps_needs_a_human_in_full_mode_every_time(
    tmp_path: Path,
) -> None:
    settings = ComputerConfig(confirm_apps=["EVENT TESTER"])  # xev's title, without case
    human = Human("allow")
    async with bench(tool_context(tmp_path, mode="full", approver=human), settings) as b:
        await b.xev("600x400+100+100")
        # Nothing has the focus on a bare Xvfb: the app in front cannot be told, and with
        # confirm_apps set that needs a human too.
        unknown = await b.call("computer_click", x=300, y=250, screenshot=False)
        assert not unknown.result.is_error
        assert "cannot be told" in human.asked[0].summary
        b.xdotool("search", "--name", "Event Tester", "windowfocus", "--sync")
        first = await b.call("computer_click", x=300, y=250, screenshot=False)
        assert not first.result.is_error
        second = await b.call("computer_click", x=300, y=250, screenshot=False)
        assert not second.result.is_error
        # allowed "for the session", and still asked again: the grant does not stand in
        assert [r.tool for r in human.asked] == ["computer_click"] * 3
        assert "event tester" in human.asked[1].summary.lower()
        assert not (await b.call("computer_cursor")).result.is_error  # a query: not asked
        assert len(human.asked) == 3

        b.ctx = tool_context(tmp_path, mode="full")  # unattended: nobody to confirm
        denied = await b.call("computer_click", x=300, y=250, screenshot=False)
        assert denied.result.is_error and "nobody can approve" in denied.result.text

        reviewer = Reviewer()
        alone = ReviewerApprover(reviewer, None)  # type: ignore[arg-type]  # a stand-in reviewer
        b.ctx = tool_context(tmp_path, mode="full", approver=alone)
        by_reviewer = await b.call("computer_click", x=300, y=250, screenshot=False)
        assert by_reviewer.result.is_error and "nobody can approve" in by_reviewer.result.text
        assert reviewer.asked == []

        then_human = ReviewerApprover(reviewer, Human("deny"))  # type: ignore[arg-type]  # likewise
        b.ctx = tool_context(tmp_path, mode="full", approver=then_human)
        refused = await b.call("computer_click", x=300, y=250, screenshot=False)
        assert refused.result.is_error and "denied by terminal" in refused.result.text
        assert reviewer.asked == []


async def test_opening_an_app_in_confirm_apps_needs_a_human(tmp_path: Path) -> None:
    settings = ComputerConfig(confirm_apps=["xeyes"])
    human = Human("deny")
    async with bench(tool_context(tmp_path, mode="full", approver=human), settings) as b:
        denied = await b.call("computer_open", app="/usr/bin/xeyes")
        assert denied.result.is_error and "denied by terminal" in denied.result.text
        assert [r.tool for r in human.asked] == ["computer_open"]
        assert "xeyes" in human.asked[0].summary
        assert not b.window("xeyes") if b.desktops.started("main") else True


async def test_read_only_mode_denies_every_action_but_waiting(tmp_path: Path) -> None:
    async with bench(tool_context(tmp_path, mode="read-only"), ComputerConfig()) as b:
        denied = await b.call("computer_screenshot")
        assert denied.result.is_error and "not allowed in read-only mode" in denied.result.text
        assert not (await b.call("computer_wait", seconds=0.01)).result.is_error
        assert b.desktops.started("main") is None  # no desktop was started for them
