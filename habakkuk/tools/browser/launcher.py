"""Starting Chrome or Chromium over --remote-debugging-pipe (spec 000 "Browser").

The browser gets two inherited pipes (it reads commands on fd 3 and writes on fd 4), so
no debugging port is open to other local users; it runs in its own session and process
group, and it exits by itself when the command pipe closes, so a Habakkuk killed with -9
leaves no browser behind. A pid file in the profile lets the next start kill one that
hung anyway (only when its command line names that profile).

`LaunchSpec` is what any caller varies: the toolset's per-agent browser, and a dedicated
one (a meeting's: its own profile, fake media flags, another user agent) through
`extra_args`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path

from habakkuk.engine.browser_config import BINARY_NAMES
from habakkuk.engine.timeouts import wait_within

from .cdp import CdpConnection, PipeTransport

PID_FILE = "habakkuk-browser.pid"

# Flags every browser we start gets: no first-run UI, no background traffic of its own
# (nothing the guard would have to explain), no QUIC (UDP would pass by the proxy).
BASE_FLAGS = (
    "--remote-debugging-pipe",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-features=Translate,MediaRouter,OptimizationHints",
    "--password-store=basic",
    "--use-mock-keychain",
    "--mute-audio",
)


@dataclass(frozen=True)
class LaunchSpec:
    """One browser to start: the binary, its profile folder, and what varies by caller."""

    binary: str
    profile: Path
    headless: bool = True
    proxy_port: int | None = None  # the pinning proxy every request goes through
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    window: tuple[int, int] = (1280, 900)


def find_binary(configured: str) -> str | None:
    """The browser to start: the configured path or name, else the first one on PATH."""
    if configured:
        return shutil.which(configured) or (configured if os.access(configured, os.X_OK) else None)
    for name in BINARY_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def needs_no_sandbox() -> bool:
    """Chromium's sandbox refuses to run as root (containers): --no-sandbox then only."""
    return os.geteuid() == 0


def browser_args(spec: LaunchSpec) -> list[str]:
    """The full argument list of `spec` (after the binary)."""
    args = [*BASE_FLAGS, f"--user-data-dir={spec.profile}"]
    width, height = spec.window
    args.append(f"--window-size={width},{height}")
    if spec.headless:
        args.append("--headless")
    if needs_no_sandbox():
        args.append("--no-sandbox")
    if spec.proxy_port is not None:
        args += [
            f"--proxy-server=http://127.0.0.1:{spec.proxy_port}",
            "--proxy-bypass-list=<-loopback>",  # loopback too goes through the guard
        ]
    args += spec.extra_args
    args.append("about:blank")
    return args


@dataclass
class Launched:
    """A started browser: its process (leader of its own group) and its connection."""

    process: asyncio.subprocess.Process
    connection: CdpConnection
    profile: Path

    async def stop(self, grace: float = 5.0) -> None:
        """Close the pipe (the browser exits), then kill its group if it lingers."""
        await self.connection.close()
        try:
            await wait_within(self.process.wait(), grace)
        except TimeoutError:
            _kill_group(self.process.pid)
            await self.process.wait()
        _kill_group(self.process.pid)  # helpers (zygotes) that outlived the main process
        with contextlib.suppress(OSError):
            (self.profile / PID_FILE).unlink()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def kill_stale(profile: Path) -> bool:
    """Kill a browser an earlier run left on `profile` (pid file, or the profile's
    SingletonLock), when its command line still names the profile; True if one was."""
    candidates: list[int] = []
    with contextlib.suppress(OSError, ValueError):
        candidates.append(int((profile / PID_FILE).read_text().strip()))
    with contextlib.suppress(OSError, ValueError):
        # SingletonLock is a symlink to "hostname-pid".
        candidates.append(int(os.readlink(profile / "SingletonLock").rsplit("-", 1)[1]))
    killed = False
    for pid in dict.fromkeys(candidates):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"--user-data-dir={profile}".encode() in command:
            _kill_group(pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed = True
    for leftover in ("SingletonLock", "SingletonSocket", "SingletonCookie"):
        with contextlib.suppress(OSError):
            (profile / leftover).unlink()
    return killed


async def launch(spec: LaunchSpec) -> Launched:
    """Start the browser of `spec` and return it connected (not yet reading)."""
    spec.profile.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(spec.profile, 0o700)
    kill_stale(spec.profile)
    commands_read, commands_write = os.pipe()
    replies_read, replies_write = os.pipe()
    try:
        # The shell only moves the two pipe ends to fds 3 and 4 and execs the browser
        # (bash: dash takes no fd numbers above 9 in a redirection).
        shell = f'exec "$0" "$@" 3<&{commands_read} 4>&{replies_write}'
        process = await asyncio.create_subprocess_exec(
            shutil.which("bash") or "/bin/bash",
            "-c",
            shell,
            spec.binary,
            *browser_args(spec),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            pass_fds=(commands_read, replies_write),
            start_new_session=True,  # its own session and process group
        )
    except BaseException:
        for fd in (commands_write, replies_read):
            os.close(fd)
        raise
    finally:
        os.close(commands_read)
        os.close(replies_write)
    (spec.profile / PID_FILE).write_text(f"{process.pid}\n")
    connection = CdpConnection(PipeTransport(commands_write, replies_read))
    return Launched(process, connection, spec.profile)
