"""A real OpenSSH server (Debian's openssh-server) on 127.0.0.1 with a config of its own in
a temp folder: a throwaway host key, a throwaway client key, a free port. The ssh sandbox's
tests run their commands through it; the "remote" is this machine, under another folder.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"
_START_BOUND = 20.0


def free_port() -> int:
    """A port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def keygen(path: Path) -> None:
    """A new ed25519 key pair at path (and path.pub), no passphrase."""
    for old in (path, path.with_name(path.name + ".pub")):
        with contextlib.suppress(FileNotFoundError):
            old.unlink()
    subprocess.run(
        [KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", "habakkuk-test", "-f", str(path)],
        check=True,
    )


def fingerprint(public_key: Path) -> str:
    """SHA256:... of a public key file."""
    out = subprocess.run(
        [KEYGEN, "-l", "-f", str(public_key)], capture_output=True, text=True, check=True
    ).stdout
    return out.split()[1]


class Sshd:
    """One sshd on loopback; `stop` ends it and every session it serves."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.user = getpass.getuser()
        self.host_key = root / "host_ed25519"
        self.client_key = root / "client_ed25519"
        keygen(self.host_key)
        keygen(self.client_key)
        authorized = root / "authorized_keys"
        authorized.write_text(self.client_key.with_name("client_ed25519.pub").read_text())
        authorized.chmod(0o600)
        self.config = root / "sshd_config"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def host_fingerprint(self) -> str:
        """The fingerprint of the key the server offers now."""
        return fingerprint(self.host_key.with_name(self.host_key.name + ".pub"))

    def start(self) -> None:
        """Start sshd and wait until it accepts connections."""
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # its privilege separation folder
        self.config.write_text(
            f"Port {self.port}\n"
            "ListenAddress 127.0.0.1\n"
            f"HostKey {self.host_key}\n"
            f"PidFile {self.root}/sshd.pid\n"
            f"AuthorizedKeysFile {self.root}/authorized_keys\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "UsePAM no\n"
            "StrictModes no\n"
            "PermitRootLogin prohibit-password\n"
            "MaxSessions 200\n"
            "MaxStartups 200\n"
            "LogLevel ERROR\n"
            # bash started by sshd reads ~/.bashrc only at SHLVL 0: this machine's rc
            # files (a pyenv init takes ~0.5 s) are not what the tests measure.
            "SetEnv SHLVL=1\n"
        )
        # A session of its own: stop() ends the listener and every connection's process.
        with open(self.root / "sshd.log", "ab") as log:
            self.process = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(self.config)],
                stdin=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + _START_BOUND
        while True:
            if self.process.poll() is not None:
                said = (self.root / "sshd.log").read_text(errors="replace")
                raise RuntimeError(f"sshd did not start: {said}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 1),
            ):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("sshd did not listen in time")
            time.sleep(0.05)

    def stop(self) -> None:
        """Kill sshd and the processes of its sessions."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.process = None

    def new_host_key(self) -> None:
        """Restart with another host key (what a changed or spoofed host looks like)."""
        self.stop()
        keygen(self.host_key)
        self.start()
