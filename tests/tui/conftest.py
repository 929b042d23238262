"""Helpers for the terminal app's tests: an app on a test home, its messages, SVG snapshots.

Snapshots are kept under snapshots/tui/<test file>/ at the repository root (not
syrupy's default __snapshots__ beside the test), via a small syrupy extension
built on pytest-textual-snapshot's SVG extension (which strips the random ids
Rich puts into every SVG).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

import pytest
from pytest_textual_snapshot import SVGImageExtension
from syrupy.assertion import SnapshotAssertion
from textual.message import Message
from textual.notifications import Notify

from habakkuk.app import HabakkukApp
from habakkuk.screens.chat import ChatScreen
from tests.conftest import WriteConfig, mock_config
from tests.fakes.model_server import FakeModelServer
from tests.helpers import eventually
from tests.snapshot_workers import remember_session

if TYPE_CHECKING:
    from syrupy.location import PyTestLocation
    from textual.pilot import Pilot
    from textual.screen import Screen

    from habakkuk.engine.home import Home
    from habakkuk.runtime import Runtime

REPO = Path(__file__).resolve().parents[2]
SNAPSHOTS = REPO / "snapshots" / "tui"


class RepoSnapshotExtension(SVGImageExtension):  # type: ignore[misc]  # its package has no types
    """SVG snapshots stored in snapshots/tui/<test file name>/."""

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(SNAPSHOTS / Path(test_location.filepath).stem)


@pytest.fixture
def models(model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    """The fake model server, where the setup screen's key check goes (the SDKs' own
    ANTHROPIC_BASE_URL and OPENAI_BASE_URL point at it)."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", model_server.base_url)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{model_server.base_url}/v1")
    return model_server


@pytest.fixture
def svg_snapshot(snapshot: SnapshotAssertion, request: pytest.FixtureRequest) -> SnapshotAssertion:
    """Compare `app.export_screenshot()` with the stored SVG."""
    remember_session(request.config, snapshot)  # for the unused-snapshot check under xdist
    return snapshot.use_extension(RepoSnapshotExtension)


async def ready(pilot: Pilot[Any]) -> HabakkukApp:
    """Wait until the app's runtime is open and the chat screen is loaded."""
    app = pilot.app
    assert isinstance(app, HabakkukApp)
    await eventually(lambda: app.runtime is not None, what="the runtime to open")
    await eventually(
        lambda: app.get_chat() is not None or app.current_mode != "chat", what="the chat screen"
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


def chat_of(app: HabakkukApp) -> ChatScreen:
    """The app's chat screen, which `ready` has waited for."""
    chat = app.get_chat()
    assert chat is not None, "the chat screen is not loaded"
    return chat


def runtime_of(app: HabakkukApp) -> Runtime:
    """The app's runtime, which `ready` has waited for."""
    assert app.runtime is not None, "the runtime is not open"
    return app.runtime


def make_app(home: Home | None, **kwargs: Any) -> HabakkukApp:
    """An app on the test home, with no cursor blink or animation (deterministic frames)."""
    return HabakkukApp(home, animate=False, **kwargs)


class TurnIds(TypedDict):
    """The session and turn an event of a turn belongs to: `TurnText(**ids, text=...)`."""

    session: str
    turn: str


M = TypeVar("M", bound=Message)


class Seen:
    """Every message posted in the app while it runs (run_test's message_hook)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def __call__(self, message: Message) -> None:
        self.messages.append(message)

    def of(self, kind: type[M]) -> list[M]:
        """The messages of one type, oldest first."""
        return [m for m in self.messages if isinstance(m, kind)]


@dataclass
class Running:
    """An app under run_test, with what it posted: drive it by keys, observe its messages."""

    app: HabakkukApp
    pilot: Pilot[Any]
    seen: Seen
    # How many turns had been sent when the test last sent one or saw one finish: the
    # next turn_finished() waits for a turn sent after that.
    _turns_before: int = field(default=0)

    @property
    def chat(self) -> ChatScreen:
        """The chat screen."""
        return chat_of(self.app)

    @property
    def screen(self) -> Screen[Any]:
        """The screen shown now."""
        return self.app.screen

    @property
    def runtime(self) -> Runtime:
        """The app's open runtime (the facade the screens use)."""
        assert self.app.runtime is not None, "the app's runtime is not open"
        return self.app.runtime

    async def send(self, text: str) -> None:
        """Type `text` into the chat's composer and press Enter."""
        self._turns_before = len(self.seen.of(ChatScreen.TurnSent))
        await send(self.pilot, text)

    async def press(self, *keys: str) -> None:
        """Press keys, as the user would."""
        await self.pilot.press(*keys)

    @property
    def last_turn(self) -> str:
        """The id of the turn the chat sent last."""
        sent = self.seen.of(ChatScreen.TurnSent)
        assert sent, "no turn was sent from the chat"
        return sent[-1].turn

    async def turn_finished(self) -> str:
        """Wait until the turn sent last has ended; returns how (done, stopped, ...)."""
        await eventually(
            lambda: len(self.seen.of(ChatScreen.TurnSent)) > self._turns_before,
            what="a turn to be sent",
        )
        turn = self.last_turn
        self._turns_before = len(self.seen.of(ChatScreen.TurnSent))

        def ended() -> list[ChatScreen.TurnFinished]:
            return [m for m in self.seen.of(ChatScreen.TurnFinished) if m.turn == turn]

        await eventually(ended, what=f"turn {turn} to finish")
        await self.pilot.pause()
        return ended()[0].status

    def toasts(self) -> list[str]:
        """The messages of the notifications (toasts) the app was asked to show."""
        return [str(n.notification.message) for n in self.seen.of(Notify)]


@asynccontextmanager
async def running(
    app: HabakkukApp, *, size: tuple[int, int] = (80, 24), wait_ready: bool = True
) -> AsyncIterator[Running]:
    """Run `app` headless, recording its messages; with `wait_ready`, until its runtime is
    open and its chat loaded (not for an app that starts on the setup screen)."""
    seen = Seen()
    async with app.run_test(size=size, message_hook=seen) as pilot:
        if wait_ready:
            await ready(pilot)
        yield Running(app, pilot, seen)


ChatApp = Callable[..., AbstractAsyncContextManager[Running]]


@pytest.fixture
def chat_app(write_config: WriteConfig) -> ChatApp:
    """Start the app on a test home whose one agent talks to a (scripted) mock provider.

    `chat_app(script, mode=..., extra=..., size=...)` is an async context manager
    yielding the ready `Running` app.
    """

    def start(
        script: str = "", *, mode: str = "full", extra: str = "", size: tuple[int, int] = (80, 24)
    ) -> AbstractAsyncContextManager[Running]:
        write_config(mock_config(script, mode=mode, extra=extra))
        return running(make_app(None), size=size)

    return start


def notices(app: Any) -> list[str]:
    """The texts of the notes the chat shows (command answers, errors, "Turn stopped.")."""
    from habakkuk.widgets.notice import Notice

    return [n.text for n in app.screen.query(Notice)]


async def a_call_runs(app: Any) -> None:
    """Wait (bounded) until a tool card of the chat shows its call running."""
    from habakkuk.widgets.tool_card import ToolCard

    await eventually(
        lambda: any(c.status == "running" for c in app.screen.query(ToolCard)),
        what="a tool call to run",
    )


def status_text(app: Any) -> str:
    """The chat's status line as drawn."""
    from habakkuk.widgets.status_line import StatusLine

    return str(app.screen.query_one(StatusLine).render())


def markdown_text(app: Any) -> str:
    """Every Markdown source on the screen, joined: the replies as rendered."""
    from textual.widgets import Markdown

    return "\n".join(m.source for m in app.screen.query(Markdown))


def drawn(widget: Any) -> list[str]:
    """The lines of `widget` as drawn on the screen now (what fits of them, cut or not)."""
    return [widget.render_line(y).text for y in range(widget.size.height)]
