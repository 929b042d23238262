"""Where an install comes from: parsed from what the user types, then fetched and staged.

What `habakkuk skills install SOURCE` (and `plugins install`) accepts, first match wins:
- `github:OWNER/REPO[/PATH][@REF]`: a repository, or a folder of it, at a branch, tag
  or commit (default: the default branch);
- `https://github.com/OWNER/REPO[/tree/REF[/PATH]]` (also `/blob/REF/PATH/SKILL.md`,
  which means the folder holding it);
- any other http(s) URL: a SKILL.md (a URL ending in .md, or a body that starts with
  frontmatter) or an archive (.tar.gz, .tgz, .tar, .tar.bz2, .tar.xz, .zip; else
  recognised by its first bytes);
- a local folder or archive: a path starting with /, ./, ../ or ~, a file:// URL, or
  any text naming something that exists;
- `registry:NAME`, `registry:REGISTRY/NAME`, or `REGISTRY/NAME` for a configured
  registry: a name looked up in the registries' indexes (hub/registry.py);
- `OWNER/REPO[/PATH][@REF]`: GitHub again, without the prefix;
- a bare `NAME`: looked up in the registries.

`fetch` brings the source into a staging folder (HOME/skills/.staging/<random>/ or
plugins/.staging) through unpack.py's limits and rules and says what it resolved to:
the commit for GitHub, the registry entry's version (else the commit or hash beneath),
the SHA-256 of the downloaded bytes for a URL, the tree hash for a local folder.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Literal
from urllib.parse import unquote, urlsplit

from habakkuk.engine.errors import HabakkukError
from habakkuk.knowledge.hub.download import Http
from habakkuk.knowledge.hub.github import GitHub
from habakkuk.knowledge.hub.lock import SourceKind
from habakkuk.knowledge.hub.registry import lookup, split_name
from habakkuk.knowledge.hub.treehash import file_sha256, tree_hash
from habakkuk.knowledge.hub.unpack import DIR_MODE, FILE_MODE, Limits, copy_folder, unpack_archive

OWNER = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})"
REPO = r"[A-Za-z0-9._-]{1,100}"
GITHUB_SPEC = re.compile(
    rf"^(?P<owner>{OWNER})/(?P<repo>{REPO})(?P<path>(?:/[^@]+)?)(?:@(?P<ref>.+))?$"
)
GITHUB_HOSTS = ("github.com", "www.github.com")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")
Section = Literal["skills", "plugins"]


@dataclass(frozen=True)
class Source:
    """A parsed source. `text` is its canonical spelling (what the lock records and
    `update` parses again)."""

    kind: SourceKind
    text: str
    owner: str = ""
    repo: str = ""
    path: str = ""  # a folder of the repository ("" = its root)
    ref: str = ""
    url: str = ""
    local: Path | None = None
    registry: str = ""  # REGISTRY of REGISTRY/NAME ("" = look in all)
    name: str = ""  # the registry name

    def default_name(self) -> str:
        """The name to install under when the files do not say: the last part of the
        folder, the repository, the URL's file or the registry name."""
        if self.kind == "github":
            return PurePosixPath(self.path).name if self.path else self.repo
        if self.kind == "registry":
            return self.name
        if self.kind == "path" and self.local is not None:
            return _stem(self.local.name)
        stem = _stem(PurePosixPath(urlsplit(self.url).path).name)
        if stem.lower() == "skill":  # .../weekly-report/SKILL.md
            return PurePosixPath(urlsplit(self.url).path).parent.name
        return stem


def _stem(name: str) -> str:
    lower = name.lower()
    for suffix in (*ARCHIVE_SUFFIXES, ".md"):
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _github(owner: str, repo: str, path: str, ref: str) -> Source:
    repo = repo[:-4] if repo.endswith(".git") else repo
    path = path.strip("/")
    if any(part in ("", ".", "..") for part in path.split("/")) and path:
        raise HabakkukError(f"github:{owner}/{repo}/{path}: a path with `..` or empty parts")
    text = f"github:{owner}/{repo}" + (f"/{path}" if path else "") + (f"@{ref}" if ref else "")
    return Source("github", text, owner=owner, repo=repo, path=path, ref=ref)


def _github_spec(spec: str, given: str) -> Source:
    match = GITHUB_SPEC.match(spec)
    if not match:
        raise HabakkukError(f"{given!r}: not OWNER/REPO[/PATH][@REF]")
    return _github(match["owner"], match["repo"], match["path"] or "", match["ref"] or "")


def _github_url(url: str) -> Source | None:
    parts = urlsplit(url)
    if parts.hostname not in GITHUB_HOSTS:
        return None
    segments = [unquote(s) for s in parts.path.split("/") if s]
    if len(segments) < 2:
        raise HabakkukError(f"{url}: not a GitHub repository URL")
    owner, repo, rest = segments[0], segments[1], segments[2:]
    ref = ""
    path = ""
    if rest:
        if rest[0] not in ("tree", "blob") or len(rest) < 2:
            raise HabakkukError(f"{url}: expected /tree/REF/PATH after the repository")
        # A ref with a slash cannot be told from a path here; github:OWNER/REPO/PATH@REF can.
        ref, tail = rest[1], rest[2:]
        if rest[0] == "blob" and tail:
            tail = tail[:-1]  # the file's folder
        path = "/".join(tail)
    if not re.fullmatch(OWNER, owner) or not re.fullmatch(REPO, repo):
        raise HabakkukError(f"{url}: not a GitHub repository URL")
    return _github(owner, repo, path, ref)


def _registry(spec: str, given: str) -> Source:
    registry, name = split_name(spec)
    if not name or "/" in name:
        raise HabakkukError(f"{given!r}: not a registry name (NAME or REGISTRY/NAME)")
    text = "registry:" + (f"{registry}/{name}" if registry else name)
    return Source("registry", text, registry=registry, name=name)


def _path(path: Path) -> Source:
    local = path.expanduser().resolve()
    return Source("path", str(local), local=local)


def parse_source(text: str, registries: Mapping[str, str], *, cwd: Path | None = None) -> Source:
    """The source `text` names (see the module docstring); HabakkukError when it names none."""
    given = text.strip()
    if not given:
        raise HabakkukError("give a source: a GitHub repository, a URL, a path or a name")
    if given.startswith("github:"):
        return _github_spec(given[len("github:") :], given)
    if given.startswith("registry:"):
        return _registry(given[len("registry:") :], given)
    if given.startswith("file://"):
        return _path(Path(unquote(urlsplit(given).path)))
    if given.startswith(("http://", "https://")):
        return _github_url(given) or Source("url", given, url=given)
    if "://" in given:
        raise HabakkukError(f"{given}: only http, https and file URLs are fetched")
    base = cwd or Path.cwd()
    candidate = Path(given).expanduser()
    if not candidate.is_absolute():
        candidate = base / candidate
    if given.startswith(("/", "./", "../", "~")) or candidate.exists():
        if not candidate.exists():
            raise HabakkukError(f"{given}: no such file or folder")
        return _path(candidate)
    head, sep, _ = given.partition("/")
    if sep and head in registries and given.count("/") == 1 and "@" not in given:
        return _registry(given, given)
    if sep:
        return _github_spec(given, given)
    if re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,99}", given):
        return _registry(given, given)
    raise HabakkukError(f"{given!r}: not a GitHub repository, URL, path or registry name")


@dataclass(frozen=True)
class Fetched:
    """A source brought into the staging folder."""

    source: Source  # for a registry name: the registry's source, with the name kept below
    root: Path  # the staged folder holding what was asked for
    resolved: str  # the commit, version or content hash
    ref: str = ""
    registry: str = ""  # the registry the name came from
    registry_name: str = ""
    pinned: str = ""  # the registry entry's tree hash ("" = not pinned)


async def fetch(
    source: Source,
    staging: Path,
    *,
    http: Http,
    registries: Mapping[str, str],
    limits: Limits | None = None,
    section: Section = "skills",
) -> Fetched:
    """Bring `source` into the new folder `staging` (removed by the caller)."""
    limits = limits or Limits()
    staging.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    tree = staging / "tree"
    if source.kind == "registry":
        entry = await lookup(http, registries, source.text[len("registry:") :], section)
        inner = parse_source(entry.source, {}, cwd=entry.base or Path.cwd())
        if inner.kind == "path" and entry.base is None:
            raise HabakkukError(
                f"registry {entry.registry}: {entry.name}: a path source in a remote index"
            )
        got = await fetch(inner, staging, http=http, registries={}, limits=limits, section=section)
        return replace(
            got,
            resolved=entry.version or got.resolved,
            registry=entry.registry,
            registry_name=entry.name,
            pinned=entry.hash,
        )
    if source.kind == "github":
        github = GitHub(http)
        sha = await github.resolve(source.owner, source.repo, source.ref)
        archive = await github.tarball(source.owner, source.repo, sha, staging / "download")
        unpacked = unpack_archive(
            archive.path,
            tree,
            limits=limits,
            strip_top=True,
            only=source.path,
            where=source.text,
        )
        archive.path.unlink()
        return Fetched(source, unpacked.folder, sha, ref=source.ref)
    if source.kind == "url":
        got_file = await http.download(source.url, staging / "download")
        path_name = PurePosixPath(urlsplit(source.url).path).name.lower()
        if path_name.endswith(".md") or (
            not path_name.endswith(ARCHIVE_SUFFIXES) and _looks_like_markdown(got_file.path)
        ):
            _single_file(got_file.path, tree, limits, source.text, section)
            return Fetched(source, tree, "sha256:" + got_file.sha256)
        unpacked = unpack_archive(got_file.path, tree, limits=limits, where=source.text)
        got_file.path.unlink()
        return Fetched(source, unpacked.folder, "sha256:" + got_file.sha256)
    assert source.local is not None
    local = source.local
    if local.is_dir():
        unpacked = copy_folder(local, tree, limits=limits)
        return Fetched(source, unpacked.folder, tree_hash(unpacked.folder))
    if not local.is_file():
        raise HabakkukError(f"{local}: no such file or folder")
    if local.name.lower().endswith(".md"):
        _single_file(local, tree, limits, str(local), section)
        return Fetched(source, tree, "sha256:" + file_sha256(local))
    unpacked = unpack_archive(local, tree, limits=limits, where=str(local))
    return Fetched(source, unpacked.folder, "sha256:" + file_sha256(local))


def _looks_like_markdown(path: Path) -> bool:
    with path.open("rb") as handle:
        head = handle.read(4)
    return head.startswith(b"---")


def _single_file(
    path: Path, tree: Path, limits: Limits, where: str, section: Section = "skills"
) -> None:
    """A lone SKILL.md: the folder holding just it (as SKILL.md, whatever it was called)."""
    if section != "skills":
        raise HabakkukError(f"{where}: one Markdown file is a skill; a plugin is a folder")
    size = path.stat().st_size
    if size > limits.file_bytes:
        raise HabakkukError(f"{where}: {size} bytes, over the limit of {limits.file_bytes}")
    tree.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    target = tree / "SKILL.md"
    target.write_bytes(path.read_bytes())
    target.chmod(FILE_MODE)
