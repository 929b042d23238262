"""What every section screen shares: the runtime, and bus events delivered as messages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

from textual.screen import Screen

from habakkuk.screens.messages import BusEvent, RuntimeReady

if TYPE_CHECKING:
    from habakkuk.engine.events import Event
    from habakkuk.runtime import Runtime


class ScreenHost(Protocol):
    """What a screen uses of the app (habakkuk.app.HabakkukApp), so it never imports app.py."""

    runtime: Runtime | None
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
    def runtime(self) -> Runtime:
        """The open runtime (screens act only after `runtime_ready`)."""
        runtime = self.happ.runtime
        if runtime is None:
            raise RuntimeError("the runtime is not open")
        return runtime

    @property
    def has_runtime(self) -> bool:
        return self.happ.runtime is not None

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

    async def on_bus_event(self, message: BusEvent) -> None:
        if self._loaded and self.happ.runtime is not None:
            await self.bus_event(message.event)

    def runtime_ready(self) -> None:
        """Called once when the runtime is open: load data here."""

    async def bus_event(self, event: Event) -> None:
        """Called for every bus event once ready, in order."""
