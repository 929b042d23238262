"""`habakkuk computer view [AGENT]`: the agent's desktop (spec 000 "Computer").

For an agent on backend xvfb it reads $HABAKKUK_HOME/computer/<agent>.json, captures the
display with the agent's cookie and draws it in the terminal with coloured half blocks
(`--watch` redraws it every second until Ctrl+C); `--save FILE` writes the PNG instead,
and so does a standard output that is not a terminal (`habakkuk computer view > s.png`).
Agents on backend linux or macos drive the screen in front of the user: nothing to show.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from habakkuk.cli.common import current_home, run_async
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.tools.computer.xvfb import DesktopState

WATCH_SECONDS = 1.0


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """`computer view [AGENT] [--save FILE] [--watch]`."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    view = actions.add_parser("view", help="show the agent's desktop in the terminal")
    view.add_argument("agent", nargs="?", help="agent name (default: the default agent)")
    view.add_argument("--save", metavar="FILE", help="write a PNG screenshot to FILE instead")
    view.add_argument("--watch", action="store_true", help="redraw every second until Ctrl+C")


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk computer view` (the exit code)."""
    return run_async(view(args.agent, args.save, args.watch))


async def view(agent: str | None, save: str | None, watch: bool) -> int:
    """Capture the agent's Xvfb and show it (or save it)."""
    import asyncio

    from habakkuk.engine.config import load_config
    from habakkuk.engine.errors import NotFound
    from habakkuk.tools.computer.view import half_blocks, running_desktop

    home = current_home()
    config = load_config(home)
    name = agent or config.default_agent or ""
    settings = config.agents.get(name)
    if settings is None:
        raise NotFound.said("computer.view.no_agent", agent=name)
    if settings.computer.backend != "xvfb":
        print(t("computer.view.own_screen", agent=name, backend=settings.computer.backend))
        return EXIT_OK
    state = running_desktop(home.root, name)
    if state is None:
        print(t("computer.view.not_running", agent=name), file=sys.stderr)
        return EXIT_FAILED
    png = await _capture(state)
    if png is None:
        return EXIT_FAILED
    if save is not None or not sys.stdout.isatty():
        if save is None:
            sys.stdout.buffer.write(png)
            return EXIT_OK
        Path(save).write_bytes(png)
        print(t("computer.view.saved", path=save, display=state.display))
        return EXIT_OK
    while True:
        size = shutil.get_terminal_size()
        header = t("computer.view.header", agent=name, display=state.display)
        drawing = half_blocks(png, size.columns, max(2, size.lines - 2))
        print(("\x1b[H\x1b[2J" if watch else "") + header + "\n" + drawing, flush=True)
        if not watch:
            return EXIT_OK
        await asyncio.sleep(WATCH_SECONDS)
        if running_desktop(home.root, name) is None:
            print(t("computer.view.not_running", agent=name), file=sys.stderr)
            return EXIT_FAILED
        png = await _capture(state)
        if png is None:
            return EXIT_FAILED


async def _capture(state: DesktopState) -> bytes | None:
    """A PNG of the desktop, or None after saying on stderr why there is none."""
    from habakkuk.tools.computer.backend import BackendError
    from habakkuk.tools.computer.view import capture_desktop

    try:
        return await capture_desktop(state)
    except BackendError as exc:
        print(t("computer.view.failed", display=state.display, reason=str(exc)), file=sys.stderr)
        return None
