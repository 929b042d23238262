"""A file in the conversation as a card: an image the user attached (a chat's photo, a
web upload) or a tool showed or made, with its name, size and where it is stored.

Enter (or a click) opens it with the system's opener (`open` on macOS, `xdg-open`
elsewhere); where there is none, or it fails, the card says where the file is. No
preview is drawn: the card is the same in every terminal.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

from textual import events, work
from textual.binding import Binding
from textual.content import Content
from textual.widgets import Static

from habakkuk.engine.i18n import t
from habakkuk.engine.timeouts import next_within

# How long an opener may take to hand the file over before the card stops waiting on it.
OPENER_SECONDS = 10.0


def system_opener() -> str | None:
    """The command that opens a file with its default application, if this system has one."""
    return shutil.which("open" if sys.platform == "darwin" else "xdg-open")


def size_text(size: int) -> str:
    """A byte count as people read it (812 B, 4.2 KB, 3.1 MB)."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024 / 1024:.1f} MB"


def _size_of(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


class FileCard(Static, can_focus=True):
    """One file of the conversation; Enter opens it."""

    DEFAULT_CSS = """
    FileCard { height: auto; margin: 0 0 1 1; padding: 0 1; border-left: outer $secondary; }
    FileCard:focus { border-left: outer $accent; background: $boost; }
    FileCard.-missing { color: $text-muted; }
    """
    BINDINGS = [Binding("enter", "open", "Open", id="file.open")]

    def __init__(self, path: str, name: str = "", media_type: str = "") -> None:
        self.path = Path(path)
        self.file_name = name or self.path.name
        self.media_type = media_type
        self.file_size = _size_of(self.path)
        super().__init__(self._content(), classes="-missing" if self.file_size is None else "")

    def _content(self) -> Content:
        mark = "🖼" if self.media_type.startswith("image/") else "📄"
        size = size_text(self.file_size) if self.file_size is not None else "no longer stored"
        return Content.assemble(
            (f"{mark} {self.file_name}", "bold"),
            f"  {size}\n",
            (str(self.path), "dim"),
        )

    def on_click(self, event: events.Click) -> None:
        self.focus()
        self.action_open()

    def action_open(self) -> None:
        """Open the file with the system's opener, or say where it is."""
        self._open()

    @work(group="file-open")
    async def _open(self) -> None:
        if self.file_size is None:
            self.notify(t("tui.file.gone", name=self.file_name, path=self.path), severity="warning")
            return
        opener = system_opener()
        if opener is None:
            self.notify(t("tui.file.no_opener", path=self.path), markup=False)
            return
        failed = ""
        try:
            process = await asyncio.create_subprocess_exec(
                opener,
                str(self.path),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # the viewer outlives a Ctrl+C in the terminal
            )
        except OSError as exc:
            failed = exc.strerror or str(exc)
        else:
            ended, code = await next_within(process.wait(), OPENER_SECONDS)
            # Not ended: still handing over (some openers wait for the viewer), which is fine.
            if ended and code:
                failed = f"{Path(opener).name} exited with {code}"
        if failed:
            self.notify(t("tui.file.failed", reason=failed, path=self.path), markup=False)
        else:
            self.notify(t("tui.file.opened", name=self.file_name), markup=False)
