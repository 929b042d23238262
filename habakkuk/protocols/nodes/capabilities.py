"""What a device offers, found when `habakkuk node run` starts (spec 000 "Device nodes").

Each capability is a command the server may invoke, present only when its program is
there: system.notify (osascript, or notify-send), screen.snapshot (screencapture, grim
on Wayland, ImageMagick's import), location.get (CoreLocationCLI on macOS, GeoClue's
where-am-i on Linux), clipboard.read/clipboard.write (pbpaste/pbcopy, wl-clipboard, xclip
or xsel); and only when asked for: system.run (--allow-run), camera.snap (--allow-camera,
ffmpeg) and files.get/files.put (--dir DIR: paths resolve inside it, links included).
Programs get their text as arguments or on stdin, never through a shell (but system.run,
whose whole point is a shell command).
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .wire import MAX_FILE_BYTES, NodeFile, NodeResult

Handler = Callable[[dict[str, Any]], Awaitable[NodeResult]]
RUN_SECONDS = 60.0
# GeoClue's demo client, where Debian and Fedora install it.
WHERE_AM_I = (
    "/usr/libexec/geoclue-2.0/demos/where-am-i",
    "/usr/lib/geoclue-2.0/demos/where-am-i",
)
OSASCRIPT_NOTIFY = (
    "on run argv\ndisplay notification (item 2 of argv) with title (item 1 of argv)\nend run"
)


class CommandFailed(Exception):
    """A device command that could not do its work, with why (sent as the result's error)."""


@dataclass(frozen=True)
class NodeOptions:
    """What the user allowed on this device beyond the harmless capabilities."""

    allow_run: bool = False
    allow_camera: bool = False
    folder: Path | None = None


async def _run(
    argv: list[str], *, stdin: bytes | None = None, timeout: float = RUN_SECONDS
) -> bytes:
    """Run a program; its stdout, or CommandFailed with its stderr."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate(stdin)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise CommandFailed(f"{Path(argv[0]).name} did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        why = err.decode(errors="replace").strip()[:500] or f"exit code {proc.returncode}"
        raise CommandFailed(f"{Path(argv[0]).name} failed: {why}")
    return out


def _text_arg(args: dict[str, Any], key: str, default: str | None = None) -> str:
    value = args.get(key, default)
    if not isinstance(value, str):
        raise CommandFailed(f"{key} must be text")
    return value


class Capabilities:
    """The commands this device offers and how each runs."""

    def __init__(
        self,
        options: NodeOptions,
        *,
        which: Callable[[str], str | None] = shutil.which,
        platform: str = sys.platform,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.options = options
        self.which = which
        self.platform = platform
        self.env = dict(os.environ if environ is None else environ)
        self.handlers: dict[str, Handler] = {}
        self._discover()

    @property
    def names(self) -> list[str]:
        """The commands offered, sorted."""
        return sorted(self.handlers)

    async def invoke(self, command: str, args: dict[str, Any]) -> NodeResult:
        """Run one command; failures are the result's error, never an exception."""
        handler = self.handlers.get(command)
        if handler is None:
            return NodeResult(error=f"this node does not offer {command}")
        try:
            return await handler(args)
        except CommandFailed as exc:
            return NodeResult(error=str(exc))
        except OSError as exc:
            return NodeResult(error=f"{command} failed: {exc.strerror or exc}")

    # -- discovery -------------------------------------------------------------------

    def _discover(self) -> None:
        mac = self.platform == "darwin"
        wayland = bool(self.env.get("WAYLAND_DISPLAY"))
        x11 = bool(self.env.get("DISPLAY"))
        if mac and self.which("osascript"):
            self.handlers["system.notify"] = self._notify_mac
        elif self.which("notify-send"):
            self.handlers["system.notify"] = self._notify_send
        snapshot = self._snapshot_program(mac, wayland, x11)
        if snapshot is not None:
            self.handlers["screen.snapshot"] = snapshot
        if mac and self.which("CoreLocationCLI"):
            self.handlers["location.get"] = self._location_mac
        elif not mac and any(os.access(path, os.X_OK) for path in WHERE_AM_I):
            self.handlers["location.get"] = self._location_geoclue
        clip = self._clipboard(mac, wayland, x11)
        if clip is not None:
            read, write = clip
            self.handlers["clipboard.read"] = lambda args: self._clip_read(read)
            self.handlers["clipboard.write"] = lambda args: self._clip_write(write, args)
        if self.options.allow_run:
            self.handlers["system.run"] = self._system_run
        if self.options.allow_camera and self.which("ffmpeg"):
            self.handlers["camera.snap"] = self._camera
        if self.options.folder is not None:
            self.handlers["files.get"] = self._files_get
            self.handlers["files.put"] = self._files_put

    def _snapshot_program(self, mac: bool, wayland: bool, x11: bool) -> Handler | None:
        if mac and self.which("screencapture"):
            return lambda args: self._capture(["screencapture", "-x"], ".png")
        if wayland and self.which("grim"):
            return lambda args: self._capture(["grim"], ".png")
        if x11 and self.which("import"):
            return lambda args: self._capture(["import", "-window", "root"], ".png")
        return None

    def _clipboard(self, mac: bool, wayland: bool, x11: bool) -> tuple[list[str], list[str]] | None:
        if mac and self.which("pbpaste") and self.which("pbcopy"):
            return ["pbpaste"], ["pbcopy"]
        if wayland and self.which("wl-paste") and self.which("wl-copy"):
            return ["wl-paste", "--no-newline"], ["wl-copy"]
        if x11 and self.which("xclip"):
            return (
                ["xclip", "-selection", "clipboard", "-o"],
                ["xclip", "-selection", "clipboard", "-i"],
            )
        if x11 and self.which("xsel"):
            return ["xsel", "--clipboard", "--output"], ["xsel", "--clipboard", "--input"]
        return None

    # -- the commands ----------------------------------------------------------------

    async def _notify_mac(self, args: dict[str, Any]) -> NodeResult:
        title, body = _text_arg(args, "title", "Habakkuk"), _text_arg(args, "body", "")
        await _run(["osascript", "-e", OSASCRIPT_NOTIFY, title, body])
        return NodeResult(text="notified")

    async def _notify_send(self, args: dict[str, Any]) -> NodeResult:
        title, body = _text_arg(args, "title", "Habakkuk"), _text_arg(args, "body", "")
        await _run(["notify-send", "--", title, body])
        return NodeResult(text="notified")

    async def _capture(self, argv: list[str], suffix: str) -> NodeResult:
        with tempfile.TemporaryDirectory() as folder:
            target = Path(folder) / f"screen{suffix}"
            await _run([*argv, str(target)])
            data = await asyncio.to_thread(target.read_bytes)
        return NodeResult(text="screen captured", files=(NodeFile(target.name, data),))

    async def _location_mac(self, args: dict[str, Any]) -> NodeResult:
        out = await _run(["CoreLocationCLI", "-json"], timeout=30)
        return NodeResult(text=out.decode(errors="replace").strip())

    async def _location_geoclue(self, args: dict[str, Any]) -> NodeResult:
        program = next(path for path in WHERE_AM_I if os.access(path, os.X_OK))
        out = await _run([program, "-t", "20"], timeout=30)
        return NodeResult(text=out.decode(errors="replace").strip())

    async def _clip_read(self, argv: list[str]) -> NodeResult:
        return NodeResult(text=(await _run(argv)).decode(errors="replace"))

    async def _clip_write(self, argv: list[str], args: dict[str, Any]) -> NodeResult:
        await _run(argv, stdin=_text_arg(args, "text").encode())
        return NodeResult(text="copied to the clipboard")

    async def _system_run(self, args: dict[str, Any]) -> NodeResult:
        command = _text_arg(args, "command")
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            async with asyncio.timeout(RUN_SECONDS):
                out, _ = await proc.communicate()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise CommandFailed(f"the command did not finish within {RUN_SECONDS:g} s") from None
        text = out.decode(errors="replace")[-100_000:]
        return NodeResult(text=f"{text}\n[exit code {proc.returncode}]".lstrip("\n"))

    async def _camera(self, args: dict[str, Any]) -> NodeResult:
        if self.platform == "darwin":
            source = ["-f", "avfoundation", "-framerate", "30", "-i", "0"]
        else:
            source = ["-f", "v4l2", "-i", _text_arg(args, "device", "/dev/video0")]
        with tempfile.TemporaryDirectory() as folder:
            target = Path(folder) / "camera.jpg"
            await _run(["ffmpeg", "-loglevel", "error", *source, "-frames:v", "1", str(target)])
            data = await asyncio.to_thread(target.read_bytes)
        return NodeResult(text="camera snapshot", files=(NodeFile(target.name, data),))

    def _inside(self, path: str) -> Path:
        """`path` within the shared folder, links resolved; CommandFailed otherwise."""
        folder = self.options.folder
        if folder is None:
            raise CommandFailed("this node shares no folder")
        root = folder.resolve()
        target = (root / path).resolve()
        if target != root and root not in target.parents:
            raise CommandFailed(f"{path} is outside the shared folder")
        return target

    async def _files_get(self, args: dict[str, Any]) -> NodeResult:
        target = self._inside(_text_arg(args, "path"))
        if not target.is_file():
            raise CommandFailed(f"{args['path']}: no such file in the shared folder")
        if target.stat().st_size > MAX_FILE_BYTES:
            raise CommandFailed(f"{args['path']} is over 25 MB")
        data = await asyncio.to_thread(target.read_bytes)
        return NodeResult(
            text=f"{args['path']} ({len(data):,} bytes)", files=(NodeFile(target.name, data),)
        )

    async def _files_put(self, args: dict[str, Any]) -> NodeResult:
        path = _text_arg(args, "path")
        target = self._inside(path)
        if "data" in args:
            try:
                data = base64.b64decode(_text_arg(args, "data"), validate=True)
            except ValueError:
                raise CommandFailed("data is not base64") from None
        else:
            data = _text_arg(args, "text").encode()
        if len(data) > MAX_FILE_BYTES:
            raise CommandFailed(f"{path} is over 25 MB")

        def write() -> None:
            target.parent.mkdir(parents=True, exist_ok=True)
            self._inside(path)  # a link made meanwhile must not lead out either
            target.write_bytes(data)

        await asyncio.to_thread(write)
        return NodeResult(text=f"wrote {path} ({len(data):,} bytes)")
