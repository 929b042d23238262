"""Desks: each agent's desktop, its backend, and what the model last saw of it.

A desk is made on the agent's first computer call: xvfb starts (or joins) the agent's
own Xvfb; linux drives the user's display (Wayland when the session is one, else X);
macos the Mac's. Calls on one desk run one at a time. The desk remembers the geometry of
the latest screenshot the model saw (every coordinate is in it) and the full-resolution
capture behind it (zoom crops that). The runtime stops every desktop this process
started when it closes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from habakkuk.engine.computer_config import ComputerConfig

from .backend import Backend, BackendError, Commands
from .geometry import Geometry, Shot, scaled_shot
from .macos import MacBackend
from .safety import FrontApp
from .wayland import WaylandBackend
from .x11 import X11Backend
from .xvfb import XvfbDesktop


class Desk:
    """One agent's desktop as the tools use it."""

    def __init__(self, backend: Backend, xvfb: XvfbDesktop | None = None):
        self.backend = backend
        self.xvfb = xvfb
        self.lock = asyncio.Lock()
        self.geometry: Geometry | None = None  # of the latest screenshot the model saw
        self.capture: bytes | None = None  # the full-resolution image behind it

    @property
    def where(self) -> str:
        """The display, in a few words ("Xvfb :99", "x11 :0", "macos")."""
        if self.xvfb is not None:
            return f"Xvfb :{self.xvfb.state.display}"
        display = self.backend.commands.env.get("DISPLAY") or self.backend.commands.env.get(
            "WAYLAND_DISPLAY", ""
        )
        return f"{self.backend.name} {display}".strip()

    async def screenshot(self) -> Shot:
        """Capture the screen and scale it; remembered as what the model sees next."""
        capture = await self.backend.capture()
        try:
            shot = await asyncio.to_thread(scaled_shot, capture.image, capture.input_size)
        except ValueError as exc:
            raise BackendError(str(exc)) from None
        self.geometry, self.capture = shot.geometry, capture.image
        return shot

    async def known_geometry(self) -> Geometry:
        """The geometry of the latest screenshot; taken from one the model does not see
        when there was none yet (an action before any screenshot)."""
        if self.geometry is None:
            await self.screenshot()
        assert self.geometry is not None  # set by screenshot()
        return self.geometry

    async def front(self) -> FrontApp | None:
        """The app in front, or None when it cannot be told."""
        return await self.backend.front()

    async def stop(self) -> None:
        """Stop the desktop when this process started it."""
        if self.xvfb is not None:
            await self.xvfb.stop()


def linux_backend(environ: Mapping[str, str]) -> Backend:
    """The user's session: Wayland when it is one (or only WAYLAND_DISPLAY is set), else
    the X display in DISPLAY; BackendError when there is neither."""
    env = dict(environ)
    wayland = env.get("WAYLAND_DISPLAY") and (
        env.get("XDG_SESSION_TYPE") == "wayland" or not env.get("DISPLAY")
    )
    if wayland:
        return WaylandBackend(Commands(env))
    if env.get("DISPLAY"):
        return X11Backend(Commands(env))
    raise BackendError(
        "no display: DISPLAY and WAYLAND_DISPLAY are unset (use backend: xvfb for a "
        "desktop of the agent's own)"
    )


# What the desktop's commands and the apps the agent opens inherit of Habakkuk's
# environment: what a desktop program needs, never the API keys and tokens beside it.
KEPT_VARIABLES = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "DISPLAY",
     "XAUTHORITY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "YDOTOOL_SOCKET"}
)  # fmt: skip
KEPT_PREFIXES = ("LC_", "XDG_")


def desktop_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of `environ` a desktop command or app gets (KEPT_VARIABLES, LC_*, XDG_*)."""
    return {
        key: value
        for key, value in environ.items()
        if key in KEPT_VARIABLES or key.startswith(KEPT_PREFIXES)
    }


class Desktops:
    """The desks of one process, by agent."""

    def __init__(
        self,
        settings: Callable[[str], ComputerConfig],
        environ: Mapping[str, str] | None = None,
    ):
        self.settings = settings
        self.environ = desktop_env(os.environ if environ is None else environ)
        self._desks: dict[str, Desk] = {}
        self._making = asyncio.Lock()

    def started(self, agent: str) -> Desk | None:
        """The agent's desk when it was made already, else None."""
        return self._desks.get(agent)

    async def desk(self, home: Path, agent: str) -> Desk:
        """The agent's desk, made (its desktop started) on first use."""
        found = self._desks.get(agent)
        if found is not None:
            return found
        async with self._making:
            found = self._desks.get(agent)
            if found is None:
                found = await self._make(home, agent, self.settings(agent))
                self._desks[agent] = found
            return found

    async def _make(self, home: Path, agent: str, settings: ComputerConfig) -> Desk:
        if settings.backend == "macos":
            return Desk(MacBackend(Commands(self.environ)))
        if settings.backend == "linux":
            return Desk(linux_backend(self.environ))
        path = self.environ.get("PATH", os.defpath)
        xvfb = await XvfbDesktop.start(
            home, agent, first_display=settings.display, size=settings.screen, path=path
        )
        env = {key: value for key, value in self.environ.items() if key != "WAYLAND_DISPLAY"}
        env.update(xvfb.state.env)
        group = xvfb.state.pid if xvfb.owned else None
        return Desk(X11Backend(Commands(env), process_group=group), xvfb)

    async def close(self) -> None:
        """Stop every desktop this process started."""
        desks, self._desks = list(self._desks.values()), {}
        await asyncio.gather(*(desk.stop() for desk in desks), return_exceptions=True)
