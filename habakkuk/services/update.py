"""`habakkuk update`'s work: how this Habakkuk was installed, the newest release on the
package index it came from, and the installer command that upgrades it.

Habakkuk is a Python package, not a single binary (a departure from spec 000, whose
update downloads a release archive): the newest final release is read from the index
(the PyPI JSON API `{index}/pypi/habakkuk/json`, else the simple index, PEP 691 JSON or
its HTML page), and the same installer that installed it upgrades it: pipx (its venv
holds pipx_metadata.json), uv (a uv tool's uv-receipt.toml, or uv in the dist-info's
INSTALLER file) or pip. An editable install (PEP 610 direct_url.json with
dir_info.editable) is refused: a checkout is updated with git.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from habakkuk.engine.errors import BadInput, HabakkukError

PACKAGE = "habakkuk"
DEFAULT_INDEX = "https://pypi.org/simple"
TIMEOUT = 20.0  # seconds for the index's answer
Installer = Literal["pip", "pipx", "uv", "uv-tool"]
_RELEASE = re.compile(r"(\d+(?:\.\d+)*)(?:\.post(\d+))?")
_FILE = re.compile(
    rf"{PACKAGE}-(\d+(?:\.\d+)*(?:\.post\d+)?)(?:\.tar\.gz|\.zip|-[^/]*\.whl)$", re.I
)


@dataclass(frozen=True)
class Install:
    """How the running Habakkuk was installed."""

    version: str
    installer: Installer
    editable: str  # the folder of an editable install ("" when it is not one)
    python: str  # the interpreter of its environment
    prefix: Path  # that environment (sys.prefix)


@dataclass(frozen=True)
class UpdatePlan:
    """What `habakkuk update` would do: current -> newest, from where, with what."""

    install: Install
    index: str
    newest: str

    @property
    def newer(self) -> bool:
        """Whether the index has a release newer than the running one."""
        return version_key(self.newest) > version_key(self.install.version)

    def command(self) -> list[str]:
        """The installer command that upgrades to `newest` from `index`."""
        pin = f"{PACKAGE}=={self.newest}"
        custom = self.index.rstrip("/") != DEFAULT_INDEX
        kind = self.install.installer
        if kind == "pipx":
            extra = [f"--pip-args=--index-url={self.index}"] if custom else []
            return ["pipx", "upgrade", *extra, PACKAGE]
        if kind == "uv-tool":
            return [
                "uv",
                "tool",
                "upgrade",
                *(["--index-url", self.index] if custom else []),
                PACKAGE,
            ]
        index = ["--index-url", self.index] if custom else []
        if kind == "uv":
            return ["uv", "pip", "install", "--python", self.install.python, *index, pin]
        return [self.install.python, "-m", "pip", "install", *index, pin]


def version_key(version: str) -> tuple[tuple[int, ...], int]:
    """A final release's order (1.2.10 after 1.2.9, .postN after it); anything else first."""
    match = _RELEASE.fullmatch(version.strip())
    if match is None:
        return (), -1
    numbers = tuple(int(part) for part in match.group(1).split("."))
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers = numbers[:-1]
    return numbers, int(match.group(2) or 0)


def is_release(version: str) -> bool:
    """A final release (no a/b/rc/dev)."""
    return _RELEASE.fullmatch(version.strip()) is not None


def current_install(prefix: Path | None = None, python: str | None = None) -> Install:
    """How this Habakkuk was installed (its distribution's metadata and environment)."""
    from importlib import metadata

    prefix = prefix or Path(sys.prefix)
    try:
        dist = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        raise BadInput.said("update.not_installed") from None
    editable = ""
    direct = dist.read_text("direct_url.json")
    if direct:
        try:
            data = json.loads(direct)
        except ValueError:
            data = {}
        info = data.get("dir_info") if isinstance(data, dict) else None
        if isinstance(info, dict) and info.get("editable"):
            url = str(data.get("url", ""))
            editable = url.removeprefix("file://") or "?"
    return Install(
        dist.version,
        detect_installer(prefix, dist.read_text("INSTALLER") or ""),
        editable,
        python or sys.executable,
        prefix,
    )


def detect_installer(prefix: Path, installer_file: str) -> Installer:
    """pipx, a uv tool, uv pip, or pip: from the environment's marks and INSTALLER."""
    if (prefix / "pipx_metadata.json").is_file():
        return "pipx"
    if (prefix / "uv-receipt.toml").is_file():
        return "uv-tool"
    return "uv" if installer_file.strip() == "uv" else "pip"


def index_url(installer: Installer, environ: dict[str, str] | None = None) -> str:
    """The index the installer reads: its variables (UV_INDEX_URL / UV_DEFAULT_INDEX for
    uv, PIP_INDEX_URL), else pip's config files, else PyPI."""
    env = os.environ if environ is None else environ
    names = ["PIP_INDEX_URL"]
    if installer in ("uv", "uv-tool"):
        names = ["UV_DEFAULT_INDEX", "UV_INDEX_URL", *names]
    for name in names:
        if env.get(name):
            return env[name].rstrip("/")
    for path in _pip_configs(env):
        parser = configparser.ConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            continue
        for section in ("install", "global"):
            if parser.has_option(section, "index-url"):
                return parser.get(section, "index-url").strip().rstrip("/")
    return DEFAULT_INDEX


def _pip_configs(env: os._Environ[str] | dict[str, str]) -> list[Path]:
    """pip's config files, the one that wins last: site, user, then PIP_CONFIG_FILE."""
    home = Path(env.get("HOME", str(Path.home())))
    xdg = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    found = [Path("/etc/pip.conf"), home / ".pip" / "pip.conf", xdg / "pip" / "pip.conf"]
    found.append(Path(sys.prefix) / "pip.conf")
    if env.get("PIP_CONFIG_FILE"):
        found.append(Path(env["PIP_CONFIG_FILE"]))
    return [path for path in reversed(found) if path.is_file()]


async def newest_release(index: str, *, timeout: float = TIMEOUT) -> str:
    """The newest final release of habakkuk on `index` (the JSON API, else the simple
    index); HabakkukError naming the index when it cannot tell."""
    import aiohttp

    base = index.rstrip("/")
    root = base.removesuffix("/simple")
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http:
            async with http.get(f"{root}/pypi/{PACKAGE}/json") as reply:
                if reply.status == 200:
                    found = _from_json_api(await reply.json(content_type=None))
                    if found:
                        return found
            accept = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
            async with http.get(f"{base}/{PACKAGE}/", headers={"Accept": accept}) as reply:
                if reply.status == 404:
                    raise BadInput.said("update.not_on_index", index=index)
                if reply.status != 200:
                    raise HabakkukError.said(
                        "update.index_status", index=index, status=reply.status
                    )
                text = await reply.text()
                kind = reply.content_type
    except aiohttp.ClientError as exc:
        raise HabakkukError.said("update.unreachable", index=index, reason=str(exc)) from None
    except TimeoutError:
        raise HabakkukError.said("update.unreachable", index=index, reason="timeout") from None
    versions = _from_simple(text, kind)
    if not versions:
        raise HabakkukError.said("update.no_release", index=index)
    return max(versions, key=version_key)


def _from_json_api(body: object) -> str:
    """The newest unyanked final release of a PyPI JSON API answer ("" when none)."""
    if not isinstance(body, dict):
        return ""
    releases = body.get("releases")
    versions: list[str] = []
    if isinstance(releases, dict):
        for version, files in releases.items():
            live = isinstance(files, list) and any(
                isinstance(f, dict) and not f.get("yanked") for f in files
            )
            if live and is_release(version):
                versions.append(version)
    info = body.get("info")
    if not versions and isinstance(info, dict) and is_release(str(info.get("version", ""))):
        versions.append(str(info["version"]))
    return max(versions, key=version_key) if versions else ""


def _from_simple(text: str, content_type: str) -> list[str]:
    """The final releases a simple index page lists (PEP 691 JSON or PEP 503 HTML)."""
    names: list[str] = []
    if "json" in content_type:
        try:
            data = json.loads(text)
        except ValueError:
            return []
        files = data.get("files") if isinstance(data, dict) else None
        for item in files if isinstance(files, list) else []:
            if isinstance(item, dict) and not item.get("yanked"):
                names.append(str(item.get("filename", "")))
    else:
        for anchor in re.finditer(r"<a\s[^>]*>([^<]+)</a>", text, re.I):
            if "data-yanked" not in anchor.group(0):
                names.append(anchor.group(1).strip())
    versions = {match.group(1) for name in names if (match := _FILE.match(name))}
    return sorted(versions, key=version_key)
