"""The Habakkuk home folder: where config, databases, blobs and agent files live."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .errors import ConfigError

HOME_ENV = "HABAKKUK_HOME"


def default_home() -> Path:
    """`$HABAKKUK_HOME`, else the platform's user data directory."""
    explicit = os.environ.get(HOME_ENV)
    if explicit:
        given = Path(explicit).expanduser()
        if given.is_symlink() and not given.exists():
            # Following it would create a home wherever it points (an unmounted disk?).
            raise ConfigError(
                f"{HOME_ENV}={given}: is a symbolic link to {os.readlink(given)}, which is missing"
            )
        return given.resolve()
    import platformdirs

    return Path(platformdirs.user_data_dir("habakkuk", appauthor=False))


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and parents) if needed and make it 0700: it may hold credentials.

    ConfigError (one line naming the folder) when it cannot be: a file in the way,
    no permission, a read-only disk.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, 0o700)
    except FileExistsError:
        raise ConfigError(f"{path}: is a file, not a folder") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot create the folder: {exc.strerror or exc}") from None
    return path


def check_home_root(root: Path) -> None:
    """ConfigError when the home itself cannot be a folder (e.g. HABAKKUK_HOME is a file)."""
    where = f"{HOME_ENV}={root}" if os.environ.get(HOME_ENV) else str(root)
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{where}: is a file, not a folder; point {HOME_ENV} at a folder")


@dataclass(frozen=True)
class Home:
    """Paths inside one home. Creating the object touches nothing on disk."""

    root: Path

    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    @property
    def env_path(self) -> Path:
        return self.root / ".env"

    @property
    def blobs_dir(self) -> Path:
        return self.root / "blobs"

    @property
    def channels_dir(self) -> Path:
        """The chat adapters' own state files (positions, device keys), 0700."""
        return self.root / "channels"

    @property
    def procs_dir(self) -> Path:
        return self.root / "procs"

    @property
    def run_dir(self) -> Path:
        """What running work records about itself for the next start (pid files)."""
        return self.root / "run"

    def db_path(self, name: str) -> Path:
        """Path of one of the per-concern databases, e.g. ``db_path("control")``."""
        return self.root / f"{name}.db"

    def agent_dir(self, agent: str) -> Path:
        return self.root / "agents" / agent

    def default_workspace(self, agent: str) -> Path:
        return self.agent_dir(agent) / "workspace"

    def checkpoints_dir(self, agent: str) -> Path:
        return self.root / "checkpoints" / agent

    def prepare(self) -> None:
        """Create the home and its private folders (0700); ConfigError when it cannot."""
        check_home_root(self.root)
        try:
            ensure_private_dir(self.root)
        except ConfigError as exc:
            raise ConfigError(f"{HOME_ENV}: {exc}") from None
        ensure_private_dir(self.blobs_dir)


def read_text_file(path: Path) -> str:
    """A config file's text (config.yaml, .env). FileNotFoundError passes through; bytes
    that are not UTF-8 are a ConfigError naming the file, the line and the byte offset."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}); save the file as UTF-8"
        ) from None


def read_env_file(path: Path) -> dict[str, str]:
    """Parse a `.env` file: KEY=VALUE lines, optional `export`, quotes, # comments.

    A malformed line is skipped rather than failing start-up; `habakkuk doctor`
    reports it. A file that is not UTF-8 is a ConfigError (read_text_file).
    """
    values: dict[str, str] = {}
    try:
        text = read_text_file(path)
    except FileNotFoundError:
        return values
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key.replace("_", "").isalnum():
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key] = value
    return values


def bad_env_lines(path: Path) -> list[int]:
    """Line numbers of `.env` lines that are not KEY=VALUE (for doctor)."""
    bad: list[int] = []
    try:
        lines = read_text_file(path).splitlines()
    except FileNotFoundError:
        return bad
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :]
        key, sep, _ = line.partition("=")
        if not sep or not key.strip().replace("_", "").isalnum():
            bad.append(number)
    return bad


class SecretSource(Protocol):
    """The values `secrets.refs` names (engine/secrets.py's SecretStore)."""

    def has(self, variable: str) -> bool: ...

    def value(self, variable: str) -> str | None: ...


class Environment:
    """Variable lookup: the process environment, then a secret manager's reference
    (`secrets.refs`, once `secrets` is set), then the home's `.env`."""

    def __init__(self, env_file: Path | None = None, overrides: dict[str, str] | None = None):
        self._file_values = read_env_file(env_file) if env_file else {}
        self._overrides = overrides or {}
        self.secrets: SecretSource | None = None

    def get(self, name: str) -> str | None:
        """The value of variable `name`, or None when unset or empty."""
        value = self._overrides.get(name) or os.environ.get(name)
        if not value and self.secrets is not None and self.secrets.has(name):
            value = self.secrets.value(name)
        return value or self._file_values.get(name) or None


def write_private_file(path: Path, text: str) -> None:
    """Write `text` atomically with mode 0600 (for .env and other credentials)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)
    os.chmod(path, 0o600)
