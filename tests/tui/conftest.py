"""Helpers for the terminal app's tests: an app on a test home, bounded waits, SVG snapshots.

Snapshots are kept under snapshots/tui/<test file>/ at the repository root (not
syrupy's default __snapshots__ beside the test), via a small syrupy extension
built on pytest-textual-snapshot's SVG extension (which strips the random ids
Rich puts into every SVG).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pytest_textual_snapshot import SVGImageExtension
from syrupy.assertion import SnapshotAssertion

from habakkuk.app import HabakkukApp
from tests.fakes.model_server import FakeModelServer

if TYPE_CHECKING:
    from syrupy.location import PyTestLocation
    from textual.pilot import Pilot

    from habakkuk.engine.home import Home

REPO = Path(__file__).resolve().parents[2]
SNAPSHOTS = REPO / "snapshots" / "tui"
WAIT_SECONDS = 15.0

# Snapshots and colours must not depend on the developer's terminal.
os.environ["NO_COLOR"] = "1"


class RepoSnapshotExtension(SVGImageExtension):
    """SVG snapshots stored in snapshots/tui/<test file name>/."""

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(SNAPSHOTS / Path(test_location.filepath).stem)


@pytest.fixture
async def models(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeModelServer]:
    """The fake model server, where the setup screen's key check goes (the SDKs' own
    ANTHROPIC_BASE_URL and OPENAI_BASE_URL point at it)."""
    async with FakeModelServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.base_url}/v1")
        yield server


@pytest.fixture
def svg_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    """Compare `app.export_screenshot()` with the stored SVG."""
    return snapshot.use_extension(RepoSnapshotExtension)


async def wait_until(
    pilot: Pilot[Any], condition: Callable[[], object], what: str, timeout: float = WAIT_SECONDS
) -> None:
    """Let the app run until `condition()` holds; fail naming `what` after `timeout`."""

    async def poll() -> None:
        # Widget state has no event to await; poll it, yielding to the app on this loop.
        # The wait is bounded by `timeout` and never stands in for a condition.
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


async def ready(pilot: Pilot[Any]) -> HabakkukApp:
    """Wait until the app's runtime is open and the chat screen is loaded."""
    app = pilot.app
    assert isinstance(app, HabakkukApp)
    await wait_until(pilot, lambda: app.runtime is not None, "the runtime to open")
    await wait_until(
        pilot, lambda: app.get_chat() is not None or app.current_mode != "chat", "the chat screen"
    )
    await pilot.pause()
    return app


async def send(pilot: Pilot[Any], text: str) -> None:
    """Type `text` into the chat's composer at once and press Enter."""
    from habakkuk.widgets.composer import Composer

    composer = pilot.app.screen.query_one(Composer)
    composer.focus()
    composer.insert(text)
    await pilot.press("enter")


def make_app(home: Home, **kwargs: Any) -> HabakkukApp:
    """An app on the test home, with no cursor blink or animation (deterministic frames)."""
    return HabakkukApp(home, animate=False, **kwargs)


async def turn_finished(pilot: Pilot[Any]) -> str:
    """Wait until the last turn sent from the chat has ended; returns its status."""
    app = pilot.app
    assert isinstance(app, HabakkukApp)
    chat = app.get_chat()
    await wait_until(
        pilot,
        lambda: chat.last_turn is not None and chat.last_turn in chat.finished,
        "the turn to finish",
    )
    await pilot.pause()
    return str(chat.finished[chat.last_turn])


def notices(app: Any) -> list[str]:
    """The texts of the notes the chat shows (command answers, errors, "Turn stopped.")."""
    from habakkuk.widgets.notice import Notice

    return [n.text for n in app.screen.query(Notice)]


async def a_call_runs(pilot: Any, app: Any) -> None:
    """Wait (bounded) until a tool card of the chat shows its call running."""
    from habakkuk.widgets.tool_card import ToolCard

    await wait_until(
        pilot,
        lambda: any(c.status == "running" for c in app.screen.query(ToolCard)),
        "a tool call to run",
    )


def toasts(app: Any) -> list[str]:
    """The messages of the notifications (toasts) the app shows now."""
    return [str(n.message) for n in app._notifications]


def markdown_text(app: Any) -> str:
    """Every Markdown source on the screen, joined: the replies as rendered."""
    from textual.widgets import Markdown

    return "\n".join(m.source for m in app.screen.query(Markdown))
