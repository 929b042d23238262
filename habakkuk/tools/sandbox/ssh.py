"""sandbox: ssh: the agent's commands run on a remote host, driven through the ssh CLI.

Every command is `ssh -T -o BatchMode=yes` over one shared connection (ControlMaster=auto,
ControlPersist=10m, the socket under $HABAKKUK_HOME/ssh, or the temp folder when that path
is too long for a socket). Host keys live in $HABAKKUK_HOME/ssh/known_hosts: the first key
of a host is accepted (and shown by `habakkuk doctor`), a changed one is refused with both
fingerprints. key_env names a variable holding a private key (written to
$HABAKKUK_HOME/ssh/<agent>.key, 0600) or a key's path. A command never falls back to
running here: when the remote cannot be reached, it fails with the reason.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from habakkuk.engine.home import ensure_private_dir, write_private_file
from habakkuk.engine.sandbox_config import SshConfig

from .base import KILLER, WRAPPER, Launch, Sandbox, SandboxError, remote_pid_file
from .docker import CliResult, run_cli

log = logging.getLogger(__name__)

TRUST_SECONDS = 30.0  # how long a control connection seen up is not checked again
_CONNECT_TIMEOUT = 30.0
_KILL_TIMEOUT = 15.0
_SOCKET_MAX = 100  # bytes a unix socket path may take, with ssh's temporary suffix
_FINGERPRINT = re.compile(r"SHA256:[A-Za-z0-9+/=]+")
_CHANGED = "REMOTE HOST IDENTIFICATION HAS CHANGED"


def host_pattern(host: str, port: int) -> str:
    """How known_hosts names a host: `host`, or `[host]:port` off port 22."""
    return host if port == 22 else f"[{host}]:{port}"


def known_fingerprints(known_hosts: Path, host: str, port: int) -> list[str]:
    """The fingerprints known_hosts holds for the host (blocking: runs ssh-keygen)."""
    keygen = shutil.which("ssh-keygen")
    if keygen is None or not known_hosts.is_file():
        return []
    import subprocess

    try:
        done = subprocess.run(
            [keygen, "-l", "-F", host_pattern(host, port), "-f", str(known_hosts)],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return _FINGERPRINT.findall(done.stdout)


class SshSandbox(Sandbox):
    """The agent's commands on its remote host, in workdir."""

    kind = "ssh"
    shares_workspace = False  # the remote would never see a file written here

    def __init__(
        self,
        agent: str,
        settings: SshConfig,
        workspace: Path,
        ssh_dir: Path,
        env: Callable[[str], str | None],
    ) -> None:
        self.agent = agent
        self.settings = settings
        self.workspace = workspace
        self.ssh_dir = ssh_dir
        self.env = env
        self.known_hosts = ssh_dir / "known_hosts"
        self._seen_at: float | None = None
        self._lock = asyncio.Lock()
        self._argv: tuple[str | None, list[str]] | None = None  # (key variable's value, argv)

    @property
    def destination(self) -> str:
        """user@host:port, for messages."""
        who = f"{self.settings.user}@" if self.settings.user else ""
        return f"{who}{self.settings.host}:{self.settings.port}"

    def control_path(self) -> str:
        """The shared connection's socket: under the home, or the temp folder when that
        path is too long for a socket (%C is a 40-character hash of the connection)."""
        here = self.ssh_dir / "cm-%C"
        if len(str(here).encode()) - 2 + 40 + 17 <= _SOCKET_MAX:
            return str(here)
        folder = Path(tempfile.gettempdir()) / f"habakkuk-ssh-{os.getuid()}"
        ensure_private_dir(folder)
        if folder.stat().st_uid != os.getuid():
            raise SandboxError(f"{folder} belongs to another user; cannot keep ssh sockets there")
        return str(folder / "cm-%C")

    def key_file(self) -> Path | None:
        """The private key to use (None: ssh's agent and config); SandboxError when the
        variable is unset or names no file."""
        variable = self.settings.key_env
        if variable is None:
            return None
        value = self.env(variable)
        if not value:
            raise SandboxError(
                f"agent {self.agent}: ssh.key_env {variable} is not set (in the environment "
                "or the home's .env); its commands do not run anywhere else"
            )
        if "PRIVATE KEY-----" in value:
            path = self.ssh_dir / f"{self.agent}.key"
            text = value.strip().replace("\\n", "\n") + "\n"
            try:
                current = path.read_text(encoding="utf-8") if path.is_file() else None
            except OSError:
                current = None
            if current != text:
                write_private_file(path, text)
            return path
        path = Path(value).expanduser()
        if not path.is_file():
            raise SandboxError(
                f"agent {self.agent}: ssh.key_env {variable} names {path}, which is not a file"
            )
        return path

    def base_argv(self) -> list[str]:
        """ssh and its options, up to the destination."""
        ssh = shutil.which("ssh")
        if ssh is None:
            raise SandboxError(
                f"agent {self.agent} runs its commands over ssh, but ssh is not on PATH"
            )
        ensure_private_dir(self.ssh_dir)
        argv = [ssh, "-T", "-o", "BatchMode=yes", "-o", "ControlMaster=auto"]
        argv += ["-o", "ControlPersist=10m", "-o", f"ControlPath={self.control_path()}"]
        argv += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        argv += ["-o", "StrictHostKeyChecking=accept-new", "-o", "ConnectTimeout=20"]
        argv += ["-p", str(self.settings.port)]
        key = self.key_file()
        if key is not None:
            argv += ["-i", str(key), "-o", "IdentitiesOnly=yes"]
        if self.settings.user:
            argv += ["-l", self.settings.user]
        return [*argv, self.settings.host]

    def remote_cwd(self, cwd: Path) -> str:
        """Where `cwd` maps on the remote: inside the workspace, under workdir."""
        local = Path(os.path.normpath(cwd))
        workdir = PurePosixPath(self.settings.workdir)
        try:
            rel = local.relative_to(Path(os.path.normpath(self.workspace)))
        except ValueError:
            if PurePosixPath(local).is_relative_to(workdir):
                return str(local)  # already a path under workdir
            raise SandboxError(
                f"cwd {cwd} is outside the workspace; commands run on {self.destination} in "
                f"{workdir} (a cwd inside the workspace maps under it)"
            ) from None
        return str(workdir / rel.as_posix()) if rel.parts else str(workdir)

    async def argv(self) -> list[str]:
        """base_argv, made again only when the key variable's value changes (each exec
        would otherwise pay a thread hop and a read of the key)."""
        variable = self.settings.key_env
        value = self.env(variable) if variable is not None else None
        cached = self._argv
        if cached is not None and cached[0] == value:
            return list(cached[1])
        argv = await asyncio.to_thread(self.base_argv)
        self._argv = (value, argv)
        return list(argv)

    async def connect(self) -> list[str]:
        """The ssh arguments, the shared connection up (checked at most every 30 s)."""
        argv = await self.argv()
        if self._seen_at is not None and time.monotonic() - self._seen_at < TRUST_SECONDS:
            return argv
        async with self._lock:
            if self._seen_at is None or time.monotonic() - self._seen_at >= TRUST_SECONDS:
                await self._open(argv)
                self._seen_at = time.monotonic()
        return argv

    async def _open(self, argv: list[str]) -> None:
        check = await self._run([*argv[:-1], "-O", "check", argv[-1]], _CONNECT_TIMEOUT)
        if check.code == 0:
            return
        # Opens the master, which stays in the background (ControlPersist) for the rest.
        opened = await self._run([*argv, "true"], _CONNECT_TIMEOUT)
        if opened.code == 0:
            return
        if _CHANGED in opened.err:
            raise SandboxError(await asyncio.to_thread(self._changed_key, opened.err))
        reason = [line for line in opened.err.strip().splitlines() if line.strip()]
        raise SandboxError(
            f"ssh to {self.destination} failed: {reason[-1] if reason else f'exit {opened.code}'}"
        )

    def _changed_key(self, err: str) -> str:
        known = known_fingerprints(self.known_hosts, self.settings.host, self.settings.port)
        offered = _FINGERPRINT.findall(err)
        return (
            f"ssh to {self.destination} refused: the host key changed (known: "
            f"{', '.join(known) or 'unknown'}; offered now: {', '.join(offered) or 'unknown'}). "
            f"If the change is expected, remove the host from {self.known_hosts}"
        )

    async def _run(self, argv: list[str], timeout: float) -> CliResult:
        try:
            return await run_cli(argv, timeout)
        except OSError as exc:
            raise SandboxError(f"cannot run ssh: {exc.strerror or exc}") from None
        except TimeoutError:
            raise SandboxError(
                f"ssh to {self.destination} did not answer in {timeout:g}s"
            ) from None

    async def launch(self, command: str, cwd: Path, *, token: str, foreground: bool) -> Launch:
        """ssh ... 'sh -c WRAPPER ...' in the remote directory `cwd` maps to."""
        where = self.remote_cwd(cwd)
        argv = await self.connect()
        mode = "reap" if foreground else "keep"
        remote = ["sh", "-c", WRAPPER, "sh", remote_pid_file(token), where, command, mode]
        return Launch((*argv, shlex.join(remote)), Path("/"), token)

    async def kill(self, token: str, signal_name: str = "KILL") -> None:
        """Signal the command's process group on the remote host."""
        try:
            argv = await self.argv()
            remote = ["bash", "-c", KILLER, "bash", remote_pid_file(token), signal_name]
            await self._run([*argv, shlex.join(remote)], _KILL_TIMEOUT)
        except SandboxError as exc:
            # Unreachable: killing the local client is all that can be done from here.
            log.warning(
                "agent %s: cannot end command %s on %s: %s",
                self.agent,
                token,
                self.destination,
                exc,
            )

    async def close(self) -> None:
        """End the shared connection now (it would otherwise persist for 10 minutes)."""
        try:
            argv = await self.argv()
            await self._run([*argv[:-1], "-O", "exit", argv[-1]], _KILL_TIMEOUT)
        except SandboxError:
            pass  # no connection, or no key any more: nothing to close
        self._seen_at = None
