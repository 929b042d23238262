"""An agent's own X display: Xvfb on the first free display from :99 (spec 000
"Computer", backend xvfb).

Xvfb starts with -nolisten tcp and -auth on an Xauthority file holding a fresh cookie
(family Wild), so only Habakkuk's commands and whoever can read that file (0600, under
the home) connect. It runs in a process group of its own, which the window manager (when
one is installed) and the apps the agent opens join, so stopping the desktop ends them
all. Its state (display, pid, cookie file, and the Habakkuk process that owns it) is in
$HABAKKUK_HOME/computer/<agent>.json: `habakkuk computer view` reads it, and the next
start kills a desktop whose owner died without stopping it (`reap_desktops`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import struct
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from habakkuk.engine.timeouts import wait_within

from .backend import BackendError

READY_SECONDS = 15.0  # for Xvfb to say it is ready
DISPLAYS_TRIED = 64
FAMILY_WILD = 0xFFFF
COOKIE_NAME = b"MIT-MAGIC-COOKIE-1"
# Tried in this order when one is installed; the first found starts with the display.
WINDOW_MANAGERS = ("openbox", "fluxbox", "icewm", "matchbox-window-manager", "twm")
_AGENT_FILE = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class DesktopState:
    """What $HABAKKUK_HOME/computer/<agent>.json holds."""

    agent: str
    display: int
    pid: int  # Xvfb's, and its process group's
    auth: str  # the Xauthority file
    owner: int  # the Habakkuk process that started it
    owner_started: int  # that process's start time (clock ticks), against pid reuse
    width: int
    height: int

    @property
    def env(self) -> dict[str, str]:
        """DISPLAY and XAUTHORITY for a command that draws on this desktop."""
        return {"DISPLAY": f":{self.display}", "XAUTHORITY": self.auth}


def computer_dir(home: Path) -> Path:
    """$HABAKKUK_HOME/computer (0700): the desktops' state and cookie files."""
    return home / "computer"


def state_path(home: Path, agent: str) -> Path:
    """The state file of `agent`'s desktop."""
    if not _AGENT_FILE.match(agent):
        raise ValueError(f"agent name {agent!r} cannot name a file")
    return computer_dir(home) / f"{agent}.json"


def read_state(home: Path, agent: str) -> DesktopState | None:
    """The agent's desktop state, or None when there is none (or it is unreadable)."""
    try:
        data = json.loads(state_path(home, agent).read_text(encoding="utf-8"))
        return DesktopState(**data)
    except (OSError, ValueError, TypeError):
        return None


def process_start(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (/proc), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields follow the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])


def owner_alive(state: DesktopState) -> bool:
    """Whether the Habakkuk process that started the desktop still runs."""
    return process_start(state.owner) == state.owner_started


def is_our_xvfb(state: DesktopState) -> bool:
    """Whether the state's pid is still that Xvfb (not a reused pid)."""
    try:
        argv = Path(f"/proc/{state.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return (
        bool(argv) and os.path.basename(argv[0]) == b"Xvfb" and f":{state.display}".encode() in argv
    )


def xauthority(cookie: bytes, display: int) -> bytes:
    """An Xauthority file's one entry: the cookie for `display`, family Wild (any host)."""

    def counted(value: bytes) -> bytes:
        return struct.pack(">H", len(value)) + value

    return (
        struct.pack(">H", FAMILY_WILD)
        + counted(b"")
        + counted(str(display).encode())
        + counted(COOKIE_NAME)
        + counted(cookie)
    )


def display_busy(display: int) -> bool:
    """Whether an X server holds (or may hold) display :N on this machine."""
    lock = Path(f"/tmp/.X{display}-lock")
    try:
        pid = int(lock.read_text().strip())
    except FileNotFoundError:
        return Path(f"/tmp/.X11-unix/X{display}").exists()
    except (OSError, ValueError):
        return True  # unreadable: someone's; leave it alone
    return process_start(pid) is not None


def _private_file(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(path, 0o600)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _remove_files(home: Path, state: DesktopState) -> None:
    for path in (state_path(home, state.agent), Path(state.auth)):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    # A killed Xvfb leaves its lock and socket; the next server on the display needs them gone.
    for path in (Path(f"/tmp/.X{state.display}-lock"), Path(f"/tmp/.X11-unix/X{state.display}")):
        with contextlib.suppress(OSError):
            path.unlink()


def reap_desktops(home: Path) -> list[DesktopState]:
    """Stop every desktop whose owning Habakkuk is gone (killed before it could stop it):
    its whole process group is killed and its files removed. Desktops of a live process
    (another Habakkuk on the same home) are left alone. The ones reaped."""
    folder = computer_dir(home)
    reaped: list[DesktopState] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        state = read_state(home, path.stem)
        if state is None or owner_alive(state):
            continue
        if is_our_xvfb(state):
            _kill_group(state.pid)
        _remove_files(home, state)
        reaped.append(state)
    return reaped


class XvfbDesktop:
    """One running Xvfb (and window manager) of one agent."""

    def __init__(self, home: Path, state: DesktopState, process: asyncio.subprocess.Process | None):
        self.home = home
        self.state = state
        self._process = process  # None: a desktop another live Habakkuk started

    @classmethod
    async def start(
        cls, home: Path, agent: str, *, first_display: int, size: tuple[int, int], path: str
    ) -> XvfbDesktop:
        """Start the agent's desktop, or join the one another live Habakkuk runs for it."""
        folder = computer_dir(home)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        known = read_state(home, agent)
        if known is not None:
            if owner_alive(known) and is_our_xvfb(known):
                return cls(home, known, None)
            if is_our_xvfb(known):
                _kill_group(known.pid)
            _remove_files(home, known)
        xvfb = shutil.which("Xvfb", path=path)
        if xvfb is None:
            raise BackendError("Xvfb is not installed (install xvfb)")
        auth = folder / f"{agent}.xauth"
        for display in range(first_display, first_display + DISPLAYS_TRIED):
            if display_busy(display):
                continue
            _private_file(auth, xauthority(secrets.token_bytes(16), display))
            process = await _launch(xvfb, display, size, auth)
            if process is None:
                continue  # taken between the look and the start: the next one
            owner = os.getpid()
            state = DesktopState(agent, display, process.pid, str(auth), owner,
                                 process_start(owner) or 0, size[0], size[1])  # fmt: skip
            _private_file(state_path(home, agent), json.dumps(asdict(state)).encode())
            desktop = cls(home, state, process)
            await desktop._window_manager(path)
            return desktop
        raise BackendError(
            f"no free X display from :{first_display} to :{first_display + DISPLAYS_TRIED - 1}"
        )

    async def _window_manager(self, path: str) -> None:
        for name in WINDOW_MANAGERS:
            program = shutil.which(name, path=path)
            if program is None:
                continue
            env = {"PATH": path, "HOME": os.environ.get("HOME", "/"), **self.state.env}
            await asyncio.create_subprocess_exec(
                program,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                env=env,
                process_group=self.state.pid,
            )
            return

    @property
    def owned(self) -> bool:
        """Whether this process started it (and so stops it)."""
        return self._process is not None

    async def stop(self) -> None:
        """End the desktop's process group (Xvfb, window manager, apps) and its files."""
        if self._process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.state.pid, signal.SIGTERM)
        try:
            await wait_within(self._process.wait(), 5.0)
        except TimeoutError:
            _kill_group(self.state.pid)
            await self._process.wait()
        _kill_group(self.state.pid)  # whatever of the group outlived Xvfb
        _remove_files(self.home, self.state)
        self._process = None


async def _launch(
    xvfb: str, display: int, size: tuple[int, int], auth: Path
) -> asyncio.subprocess.Process | None:
    """Start Xvfb on :display and wait until it says it is ready (-displayfd); None when
    it exits first (the display was taken)."""
    read_fd, write_fd = os.pipe()
    try:
        process = await asyncio.create_subprocess_exec(
            xvfb, f":{display}", "-screen", "0", f"{size[0]}x{size[1]}x24",
            "-nolisten", "tcp", "-auth", str(auth), "-displayfd", str(write_fd),
            # Without a window manager every command is the only client while it runs:
            # the server must not reset (the pointer back in the middle) when it leaves.
            "-noreset",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            pass_fds=(write_fd,),
            process_group=0,  # a group of its own (stopped or reaped whole) that apps join
        )  # fmt: skip
    finally:
        os.close(write_fd)
    try:
        said = await wait_within(asyncio.to_thread(_read_all, read_fd), READY_SECONDS)
    except TimeoutError:
        _kill_group(process.pid)
        await process.wait()
        raise BackendError(
            f"Xvfb on :{display} did not become ready within {READY_SECONDS:g} s"
        ) from None
    finally:
        os.close(read_fd)
    if said.strip() == str(display).encode():
        return process
    await process.wait()
    return None


def _read_all(fd: int) -> bytes:
    """Read a pipe until Xvfb writes its display number and a newline, or closes it."""
    data = b""
    deadline = time.monotonic() + READY_SECONDS
    while not data.endswith(b"\n") and time.monotonic() < deadline:
        chunk = os.read(fd, 64)
        if not chunk:
            break
        data += chunk
    return data
