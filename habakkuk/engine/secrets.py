"""Secret managers: the values `secrets.refs` names, read from their sources and kept in
memory for the source's cache period (spec 000 "Operations": Secret managers).

A value is never written anywhere and never logged: a failing source is logged with the
variable, the source and the error (a command's stderr, never its stdout) and left
alone for 30 seconds. Reading a source blocks (a subprocess, a file, the keyring):
on the event loop's thread `value` answers from the cache and refreshes in a thread;
`prefetch` (run off the loop at start) fills the cache first.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .redact import REDACTOR
from .secrets_config import SecretRef, SecretsConfig, SecretSourceConfig

if TYPE_CHECKING:
    from .config import Config
    from .home import Environment, Home

log = logging.getLogger(__name__)

RETRY_AFTER = 30.0  # a failing source is left alone this long
_STDERR_CUT = 300


class SecretError(Exception):
    """A source could not give a value; the text never holds one."""


@dataclass
class _Cached:
    value: str | None
    until: float  # monotonic end of its cache (or of a failure's pause)


def read_source(source: SecretSourceConfig, reference: str) -> str:
    """The value `source` holds for `reference` (blocking); SecretError otherwise."""
    match source.type:
        case "command":
            assert source.command is not None
            env = {**os.environ, "HABAKKUK_SECRET_REF": reference}
            return _run(["/bin/sh", "-c", source.command], source, env)
        case "1password":
            ref = reference if reference.startswith("op://") else f"op://{reference}"
            account = ["--account", source.account] if source.account else []
            return _run(["op", "read", *account, ref], source)
        case "bitwarden":
            return _bitwarden(source, reference)
        case "file":
            return _file(source, reference)
        case "keyring":
            return _keyring(source, reference)
    raise SecretError(f"unknown source type {source.type}")  # pragma: no cover


def _run(argv: list[str], source: SecretSourceConfig, env: dict[str, str] | None = None) -> str:
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=source.timeout_seconds,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        raise SecretError(f"{argv[0]} is not installed (not on PATH)") from None
    except subprocess.TimeoutExpired:
        raise SecretError(f"no answer in {source.timeout_seconds:g} s") from None
    except OSError as exc:
        raise SecretError(f"{argv[0]} could not start: {exc.strerror}") from None
    if done.returncode != 0:
        said = " ".join(done.stderr.split())[:_STDERR_CUT]  # stderr only: stdout may be it
        raise SecretError(f"exit status {done.returncode}" + (f": {said}" if said else ""))
    value = done.stdout.rstrip("\r\n")
    if not value:
        raise SecretError("the answer was empty")
    return value


def _bitwarden(source: SecretSourceConfig, reference: str) -> str:
    """`ITEM`: the item's password (bw get password); `ITEM#FIELD`: username, password,
    totp, notes or a custom field of the item (bw get item)."""
    item, _, wanted = reference.partition("#")
    if not wanted or wanted == "password":
        return _run(["bw", "get", "password", item], source)
    text = _run(["bw", "get", "item", item], source)
    try:
        data = json.loads(text)
    except ValueError:
        raise SecretError("bw get item did not answer JSON") from None
    login = data.get("login") or {} if isinstance(data, dict) else {}
    found = login.get(wanted) if isinstance(login, dict) else None
    if found is None and wanted == "notes" and isinstance(data, dict):
        found = data.get("notes")
    if found is None and isinstance(data, dict):
        for custom in data.get("fields") or []:
            if isinstance(custom, dict) and custom.get("name") == wanted:
                found = custom.get("value")
                break
    if not isinstance(found, str) or not found:
        raise SecretError(f"the item has no field {wanted!r}")
    return found


def _file(source: SecretSourceConfig, reference: str) -> str:
    path = Path(reference).expanduser()
    if not path.is_absolute():
        path = (source.folder or Path.cwd()) / path
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise SecretError(f"{path} is not a regular file")
        if info.st_mode & 0o077:
            raise SecretError(
                f"{path} is readable by others (mode {stat.S_IMODE(info.st_mode):o}); "
                f"chmod 600 {path}"
            )
        value = path.read_text(encoding="utf-8").rstrip("\r\n")
    except FileNotFoundError:
        raise SecretError(f"{path} does not exist") from None
    except OSError as exc:
        raise SecretError(f"{path}: {exc.strerror}") from None
    if not value:
        raise SecretError(f"{path} is empty")
    return value


def _keyring(source: SecretSourceConfig, reference: str) -> str:
    try:
        import keyring
    except Exception as exc:  # the library is a dependency, but its backends may fail
        raise SecretError(f"the keyring library could not load: {exc}") from None
    try:
        value = keyring.get_password(source.service, reference)
    except Exception as exc:  # a locked or missing keyring
        raise SecretError(f"the keyring failed: {type(exc).__name__}") from None
    if not value:
        raise SecretError(f"the keyring has no entry {source.service}/{reference}")
    return str(value)


Reader = Callable[[SecretSourceConfig, str], str]


class SecretStore:
    """The values of `secrets.refs`, cached in memory per the source's cache period."""

    def __init__(
        self,
        config: SecretsConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        reader: Reader = read_source,
    ):
        self.config = config
        self.clock = clock
        self.reader = reader
        self._cache: dict[str, _Cached] = {}
        self._lock = threading.Lock()
        self._refreshing: set[str] = set()
        self.errors: dict[str, str] = {}  # variable -> why its source last failed (no value)

    def names(self) -> list[str]:
        """The variables a reference fills."""
        return list(self.config.resolved)

    def has(self, variable: str) -> bool:
        return variable in self.config.resolved

    def value(self, variable: str) -> str | None:
        """The value of `variable` from its reference (None when it has none or its
        source failed). Off the event loop it reads the source when the cache is stale;
        on the loop it answers from the cache and refreshes in a thread."""
        ref = self.config.resolved.get(variable)
        if ref is None:
            return None
        with self._lock:
            cached = self._cache.get(variable)
        if cached is not None and cached.until > self.clock():
            return cached.value
        if _on_event_loop():
            self._refresh_in_thread(variable, ref)
            return cached.value if cached is not None else None
        return self._read(variable, ref)

    async def avalue(self, variable: str) -> str | None:
        """`value`, read off the event loop (waits for a stale value's source)."""
        return await asyncio.to_thread(self.value, variable)

    def prefetch(self) -> None:
        """Read every reference now (blocking: run it off the loop)."""
        for variable, ref in self.config.resolved.items():
            with self._lock:
                cached = self._cache.get(variable)
            if cached is None or cached.until <= self.clock():
                self._read(variable, ref)

    def _read(self, variable: str, ref: SecretRef) -> str | None:
        source = self.config.sources[ref.source]
        try:
            read = self.reader(source, ref.reference)
            value: str | None = read
            until = self.clock() + source.cache_seconds
        except SecretError as exc:
            log.warning(
                "secret %s from source %s (%s) failed: %s", variable, source.name, source.type, exc
            )
            value, until = None, self.clock() + RETRY_AFTER  # .env is read meanwhile
            self.errors[variable] = str(exc)
        else:
            self.errors.pop(variable, None)
            # Learned as it is read, not only at start: a key rotated in the manager (or a
            # reference first read late) is redacted from the first text that could hold it.
            REDACTOR.add_values([read])
        with self._lock:
            self._cache[variable] = _Cached(value, until)
        return value

    def _refresh_in_thread(self, variable: str, ref: SecretRef) -> None:
        with self._lock:
            if variable in self._refreshing:
                return
            self._refreshing.add(variable)

        def run() -> None:
            try:
                self._read(variable, ref)
            finally:
                with self._lock:
                    self._refreshing.discard(variable)

        threading.Thread(target=run, name=f"secret-{variable}", daemon=True).start()


def home_environment(home: Home, config: Config) -> Environment:
    """The variables a command of `home` reads, in the runtime's order: the process
    environment, then `secrets.refs`, then the home's .env."""
    from .home import Environment

    env = Environment(home.env_path)
    attach_secrets(env, config)
    return env


def attach_secrets(env: Environment, config: Config) -> None:
    """Have `env` read `secrets.refs` between the process environment and .env (once)."""
    if config.secrets.resolved and env.secrets is None:
        env.secrets = SecretStore(config.secrets)


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
