"""What every section screen shares: the runtime, and bus events delivered as messages."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from textual import on
from textual.screen import Screen

from habakkuk.app import HabakkukApp, RuntimeReady
from habakkuk.screens.bus_messages import BusEvent

if TYPE_CHECKING:
    from habakkuk.runtime import Runtime

S = TypeVar("S", bound="RuntimeScreen")
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


class RuntimeScreen(Screen[Any]):
    """A section screen: loads once the runtime is open and follows its events."""

    _loaded = False

    @property
    def happ(self) -> HabakkukApp:
        """The app, typed."""
        app = self.app
        assert isinstance(app, HabakkukApp)
        return app

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

    def runtime_ready(self) -> None:
        """Called once when the runtime is open: load data here."""
