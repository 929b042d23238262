"""What every section screen shares: the runtime, and bus events delivered as messages."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, cast

from textual import on
from textual.screen import Screen

from habakkuk.engine.store import StoreError
from habakkuk.screens.bus_messages import BusEvent
from habakkuk.screens.messages import RuntimeReady

if TYPE_CHECKING:
    from textual.timer import Timer

    from habakkuk.screens.backend import TerminalBackend

S = TypeVar("S", bound="RuntimeScreen")
T = TypeVar("T")
M = TypeVar("M", bound=BusEvent[Any])


def on_bus(
    *message_types: type[M],
) -> Callable[[Callable[[S, M], Any]], Callable[[S, M], Any]]:
    """`@on(message_type)` for bus events, called only once the screen follows the runtime
    (loaded, and the runtime not closed again by a quick quit)."""

    def decorate(handler: Callable[[S, M], Any]) -> Callable[[S, M], Any]:
        @functools.wraps(handler)
        async def guarded(self: S, message: M) -> None:
            if self._loaded and self.happ.runtime is not None:
                result = handler(self, message)
                if inspect.isawaitable(result):
                    await result

        for message_type in message_types:
            guarded = on(message_type)(guarded)
        return guarded

    return decorate


class ScreenHost(Protocol):
    """What a screen uses of the app (habakkuk.app.HabakkukApp), so it never imports app.py."""

    runtime: TerminalBackend | None
    motion: bool

    def listen(self, screen: Screen[Any]) -> None:
        """Deliver bus events and `RuntimeReady` to `screen`."""

    def unlisten(self, screen: Screen[Any]) -> None:
        """Stop delivering to `screen`."""

    def action_go(self, mode: str) -> None:
        """Switch to the section `mode`."""

    def open_session(self, session_id: str) -> None:
        """Show the chat section on `session_id`."""


class RuntimeScreen(Screen[Any]):
    """A section screen: loads once the runtime is open and follows its events."""

    _loaded = False

    @property
    def happ(self) -> ScreenHost:
        """The app, typed by what screens use of it."""
        return cast(ScreenHost, self.app)

    @property
    def runtime(self) -> TerminalBackend:
        """The open runtime (screens act only after `runtime_ready`)."""
        runtime = self.happ.runtime
        if runtime is None:
            raise RuntimeError("the runtime is not open")
        return runtime

    @property
    def has_runtime(self) -> bool:
        return self.happ.runtime is not None

    async def read(self, what: Callable[[TerminalBackend], Awaitable[T]]) -> T | None:
        """What `what` reads through the runtime; None when the app closed the runtime
        before (a worker queued meanwhile) or while it read (the app quits)."""
        runtime = self.happ.runtime
        if runtime is None:
            return None
        try:
            return await what(runtime)
        except StoreError:
            return None

    def on_mount(self) -> None:
        self.happ.listen(self)
        if self.happ.runtime is not None:
            self._become_ready()

    def on_unmount(self) -> None:
        self.happ.unlisten(self)

    def on_runtime_ready(self, message: RuntimeReady) -> None:
        self._become_ready()

    def _become_ready(self) -> None:
        # The runtime may already be closed again when a quick quit overtakes the message.
        if not self._loaded and self.happ.runtime is not None:
            self._loaded = True
            self.runtime_ready()

    def runtime_ready(self) -> None:
        """Called once when the runtime is open: load data here."""


class PollingScreen(RuntimeScreen):
    """A section screen that re-reads its data every `refresh_seconds` while it is shown.

    Some of what it shows changes in other processes (their approvals, their jobs), so
    the bus alone cannot tell it; the timer pauses while another screen is up.
    """

    refresh_seconds: ClassVar[float] = 5.0
    _poll: Timer | None = None

    def on_mount(self) -> None:
        # Textual runs every class's on_mount along the MRO: subclasses keep their own.
        self._poll = self.set_interval(
            self.refresh_seconds, self._poll_tick, pause=not self.is_current
        )

    def runtime_ready(self) -> None:
        self.refresh_data()

    def on_screen_resume(self) -> None:
        if self._poll is not None:
            self._poll.resume()
        if self.has_runtime:
            self.refresh_data()

    def on_screen_suspend(self) -> None:
        if self._poll is not None:
            self._poll.pause()

    def _poll_tick(self) -> None:
        if self._loaded and self.has_runtime:
            self.refresh_data()

    def refresh_data(self) -> None:
        """Re-read what the screen shows (through the runtime facade)."""
