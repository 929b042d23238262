"""A real Synapse homeserver for the Matrix tests: started on 127.0.0.1 from a temp config
(SQLite, no federation, no key servers, relaxed rate limits, cheap password hashing),
users registered through the shared-secret admin API.

Synapse is not in the `test` extra: it brings ~60 packages (Twisted and friends) that
take ~40 s to install in every CI run, so .ci/run installs it into a venv of its own in
the background and names its interpreter in $HABAKKUK_TEST_SYNAPSE. Here, where it is
installed into the project's venv, that venv's interpreter is used. It starts in ~3 s.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib.util
import json
import os
import re
import secrets
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STARTUP_BOUND = 60.0  # seconds: a cold interpreter importing Twisted on a loaded machine
SHARED_SECRET = "habakkuk-test-registration"
SERVER_NAME = "synapse.test"
_LISTENING = re.compile(r"Synapse now listening on TCP port (\d+)")


def synapse_python() -> str | None:
    """The interpreter that runs Synapse, or None where it is not installed."""
    named = os.environ.get("HABAKKUK_TEST_SYNAPSE", "")
    if named:
        return named
    return sys.executable if importlib.util.find_spec("synapse") is not None else None


@dataclass(frozen=True)
class User:
    user_id: str
    token: str


CONFIG = """\
server_name: "{server}"
pid_file: {root}/homeserver.pid
listeners:
  - port: 0
    bind_addresses: ['127.0.0.1']
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: {root}/homeserver.db
media_store_path: {root}/media
log_config: {root}/log.yaml
signing_key_path: {root}/signing.key
registration_shared_secret: "{secret}"
macaroon_secret_key: "{macaroon}"
form_secret: "{form}"
report_stats: false
trusted_key_servers: []
suppress_key_server_warning: true
enable_metrics: false
federation_domain_whitelist: []
url_preview_enabled: false
presence:
  enabled: false
bcrypt_rounds: 4
rc_message: {{per_second: 10000, burst_count: 10000}}
rc_registration: {{per_second: 10000, burst_count: 10000}}
rc_joins:
  local: {{per_second: 10000, burst_count: 10000}}
rc_invites:
  per_room: {{per_second: 10000, burst_count: 10000}}
  per_user: {{per_second: 10000, burst_count: 10000}}
"""

LOG_CONFIG = """\
version: 1
formatters:
  plain: {format: '%(asctime)s %(levelname)s %(name)s %(message)s'}
handlers:
  console: {class: logging.StreamHandler, formatter: plain, stream: ext://sys.stderr}
loggers:
  synapse.app._base: {level: INFO}
root: {level: WARNING, handlers: [console]}
disable_existing_loggers: false
"""


class Synapse:
    """One running homeserver (a subprocess) on a loopback port."""

    def __init__(self, python: str, root: Path):
        self.python = python
        self.root = root
        self.port = 0
        self.lines: list[str] = []
        self._process: subprocess.Popen[str] | None = None
        self._drainer: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Write the config, start the server and wait for the line naming its port."""
        self.root.mkdir(parents=True, exist_ok=True)
        seed = base64.b64encode(secrets.token_bytes(32)).decode().rstrip("=")
        (self.root / "signing.key").write_text(f"ed25519 a_test {seed}\n")
        (self.root / "log.yaml").write_text(LOG_CONFIG)
        config = CONFIG.format(
            server=SERVER_NAME,
            root=self.root,
            secret=SHARED_SECRET,
            macaroon=secrets.token_hex(16),
            form=secrets.token_hex(16),
        )
        (self.root / "homeserver.yaml").write_text(config)
        self._process = subprocess.Popen(
            [self.python, "-m", "synapse.app.homeserver", "-c", str(self.root / "homeserver.yaml")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.root,
        )
        listening = threading.Event()
        self._drainer = threading.Thread(target=self._drain, args=(listening,), daemon=True)
        self._drainer.start()
        if not listening.wait(STARTUP_BOUND) or not self.port:
            self.stop()
            said = "".join(self.lines[-20:])
            raise RuntimeError(f"synapse did not start within {STARTUP_BOUND}s:\n{said}")

    def _drain(self, listening: threading.Event) -> None:
        """Read Synapse's log (so its pipe never fills); note the port when it listens."""
        assert self._process is not None and self._process.stderr is not None
        for line in self._process.stderr:
            self.lines.append(line)
            found = _LISTENING.search(line)
            if found:
                self.port = int(found.group(1))
                listening.set()
        listening.set()  # it exited: start() reports what it said

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 30 s) and wait for its log's end."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(30)
        if self._drainer is not None:
            self._drainer.join(30)
        if process.stderr is not None:
            process.stderr.close()
        self._process = None

    def request(self, method: str, path: str, body: Any = None, token: str = "") -> Any:
        """A blocking JSON request (registration, before any loop runs)."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(
            self.base_url + path, data=data, method=method, headers=headers
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"{}")

    def register(self, name: str) -> User:
        """A new user through the shared-secret admin API; its id and access token."""
        nonce = self.request("GET", "/_synapse/admin/v1/register")["nonce"]
        password = secrets.token_hex(8)
        mac = hmac.new(SHARED_SECRET.encode(), digestmod=hashlib.sha1)
        mac.update(b"\x00".join(p.encode() for p in (nonce, name, password, "notadmin")))
        answer = self.request(
            "POST",
            "/_synapse/admin/v1/register",
            {
                "nonce": nonce,
                "username": name,
                "password": password,
                "admin": False,
                "mac": mac.hexdigest(),
            },
        )
        return User(str(answer["user_id"]), str(answer["access_token"]))
