"""A real IRC server for the IRC tests: an ngircd of our own on 127.0.0.1, with its own
config (a plain port, and a TLS port with a throwaway self-signed certificate), never the
system's service. `IrcPerson` is a person's IRC client on it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

from habakkuk.engine.timeouts import wait_within
from tests.channels.fake_email import make_certificate
from tests.helpers import eventually

NGIRCD = shutil.which("ngircd") or "/usr/sbin/ngircd"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


class Ngircd:
    """One ngircd process (start / stop) on a plain and a TLS loopback port."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="hk-ngircd-"))
        self.root.chmod(0o755)  # ngircd drops root for nobody, who reads its files here
        self.port = _free_port()
        self.tls_port = _free_port()
        self.cert = self.root / "cert.pem"
        self._process: asyncio.subprocess.Process | None = None

    def _config(self) -> Path:
        cert, key = make_certificate(self.root)
        key.chmod(0o644)  # a throwaway key, read by ngircd after it became nobody
        run = self.root / "run"
        run.mkdir(mode=0o777)
        run.chmod(0o777)
        path = self.root / "ngircd.conf"
        path.write_text(
            textwrap.dedent(
                f"""\
                [Global]
                Name = irc.test.local
                Info = Habakkuk test server
                Listen = 127.0.0.1
                Ports = {self.port}
                PidFile = {run}/ngircd.pid
                MotdPhrase = hello
                AdminInfo1 = tests
                AdminInfo2 = here
                AdminEMail = tests@example.org
                [Limits]
                PingTimeout = 120
                PongTimeout = 20
                MaxNickLength = 30
                [Options]
                PAM = no
                DNS = no
                Ident = no
                [SSL]
                CertFile = {cert}
                KeyFile = {key}
                Ports = {self.tls_port}
                """
            )
        )
        path.chmod(0o644)
        return path

    async def start(self) -> None:
        config = self._config()
        self._process = await asyncio.create_subprocess_exec(
            NGIRCD, "-n", "-f", str(config),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        await eventually(
            lambda: _listening(self.port) and _listening(self.tls_port),
            what="ngircd to listen",
        )

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await wait_within(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
        shutil.rmtree(self.root, ignore_errors=True)


async def running_ngircd() -> AsyncIterator[Ngircd]:
    """An ngircd running for the length of a fixture."""
    server = Ngircd()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class IrcPerson:
    """A person's IRC client: registers a nick, joins, says things, and keeps every
    PRIVMSG it gets as (from, target, text)."""

    def __init__(self, port: int, nick: str, host: str = "127.0.0.1") -> None:
        self.host, self.port, self.nick = host, port, nick
        self.got: list[tuple[str, str, str]] = []
        self.lines: list[str] = []
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self._welcomed = asyncio.Event()
        self.joined: set[str] = set()

    async def connect(self) -> None:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        self._writer = writer
        self._task = asyncio.create_task(self._read(reader))
        self.raw(f"NICK {self.nick}")
        self.raw(f"USER {self.nick} 0 * :{self.nick}")
        await asyncio.wait_for(self._welcomed.wait(), 20)

    def raw(self, line: str) -> None:
        assert self._writer is not None
        self._writer.write(line.encode() + b"\r\n")

    async def join(self, channel: str) -> None:
        self.raw(f"JOIN {channel}")
        await eventually(lambda: channel in self.joined, what=f"{self.nick} to join {channel}")

    def say(self, target: str, text: str) -> None:
        self.raw(f"PRIVMSG {target} :{text}")

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while True:
            raw = await reader.readline()
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            self.lines.append(line)
            prefix, _, rest = line.partition(" ") if line.startswith(":") else ("", "", line)
            command, _, params = rest.partition(" ")
            if command == "PING":
                self.raw(f"PONG {params}")
            elif command == "001":
                self._welcomed.set()
            elif command == "JOIN" and prefix[1:].split("!")[0] == self.nick:
                self.joined.add(params.lstrip(":"))
            elif command == "PRIVMSG":
                target, _, text = params.partition(" :")
                self.got.append((prefix[1:].split("!")[0], target, text))

    async def close(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(OSError):
                self.raw("QUIT :bye")
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await self._task


def os_supports_ngircd() -> bool:
    """Whether ngircd is installed here (the tests need it: .ci/run installs it)."""
    return os.access(NGIRCD, os.X_OK)
