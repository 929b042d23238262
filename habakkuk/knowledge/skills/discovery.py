"""Finding skills: which folders under the skills directories are skills, and which are not.

Three kinds of root, in the order a name clash is decided (the later wins):

1. each enabled plugin's skills/ folder (`config.plugin_skill_dirs`, scope "plugin");
2. HOME/skills (scope "shared"; hand-made, or installed when skills/.lock.json has it);
3. HOME/agents/<agent>/skills (scope "own"), which wins every clash.

A skill is a folder whose name matches SKILL_NAME holding a regular SKILL.md (not a
symlink) with frontmatter `name` (equal to the folder's name) and a one-line
`description`; optional `pinned: true`. The frontmatter is read leniently
(frontmatter.read_frontmatter): an unquoted `: ` in the description, which real skills
have and YAML refuses, is read as the text to the end of the line, and the skill
carries a warning (the YAML error and its line) that `skills show`, doctor and
install print; one that not even the lenient reader can read is skipped, naming the
YAML error and its line. Names starting with "." are the store's own
(.backups, .lock.json, .usage.json, .curator.json, .archive): never skills, never
reported. Everything else is skipped with a reason that `habakkuk doctor` shows.

Every new session's prompt lists the skills, so listing is cheap: a folder's parse is
cached by the folder's and SKILL.md's mtime_ns (and SKILL.md's size), and a warm listing
costs one scandir per root and one lstat per skill.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from habakkuk.knowledge.frontmatter import FrontmatterError, read_frontmatter, rfc3339
from habakkuk.knowledge.skills.types import SKILL_FILE, SKILL_NAME, SkillScope, SkippedFolder

DESCRIPTION_MAX = 1024  # characters of a description (listed in every prompt)
SKILL_MD_MAX = 256 * 1024  # a SKILL.md larger than this is skipped, never read whole


@dataclass(frozen=True)
class Found:
    """One skill folder as discovery saw it (the service turns it into a SkillSummary)."""

    name: str
    folder: Path
    scope: SkillScope
    description: str
    pinned: bool
    updated: str  # SKILL.md's mtime, RFC 3339 UTC
    plugin: str = ""
    warning: str = ""  # how SKILL.md's frontmatter was read leniently ("" when valid YAML)


@dataclass(frozen=True)
class Root:
    """A folder whose subfolders are skills of one scope."""

    path: Path
    scope: SkillScope
    plugin: str = ""


@dataclass(frozen=True)
class SkillMd:
    """What a SKILL.md says: its one-line description, pin, instructions, and the warning
    when its frontmatter was not valid YAML and was read leniently."""

    description: str
    pinned: bool
    body: str
    warning: str = ""


def parse_skill_md(text: str, folder_name: str) -> SkillMd | str:
    """What a SKILL.md's text says, or the reason it is not a skill."""
    try:
        found = read_frontmatter(text)
    except FrontmatterError as exc:
        return f"{SKILL_FILE}'s frontmatter cannot be read: {exc}"
    if found is None:
        return "SKILL.md has no frontmatter (--- name: ... description: ... ---)"
    meta = found.meta
    name = meta.get("name")
    if not isinstance(name, str) or not name.strip():
        return "SKILL.md's frontmatter has no name"
    if name.strip() != folder_name:
        return f"SKILL.md's name {name.strip()!r} differs from the folder's name"
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        return "SKILL.md's frontmatter has no description"
    # A folded YAML description may span lines in the file; it is listed as one.
    line = " ".join(description.split())
    if len(line) > DESCRIPTION_MAX:
        line = line[: DESCRIPTION_MAX - 1].rstrip() + "…"
    warning = f"{SKILL_FILE} {found.warning}" if found.warning else ""
    return SkillMd(line, meta.get("pinned") is True, found.body.strip("\n"), warning)


class Discovery:
    """The skills under a set of roots, with a parse cache shared by every listing."""

    def __init__(self) -> None:
        # folder -> ((folder mtime_ns, SKILL.md mtime_ns, size), Found or skip reason)
        self._cache: dict[Path, tuple[tuple[int, int, int], Found | str]] = {}
        self._lock = threading.Lock()

    def scan(self, roots: Iterable[Root]) -> tuple[dict[str, Found], list[SkippedFolder]]:
        """The skills of `roots` by name (a later root wins a clash) and the skipped folders."""
        found: dict[str, Found] = {}
        skipped: list[SkippedFolder] = []
        for root in roots:
            for item in self._root(root):
                if isinstance(item, SkippedFolder):
                    skipped.append(item)
                else:
                    found[item.name] = item
        return found, skipped

    def _root(self, root: Root) -> list[Found | SkippedFolder]:
        try:
            entries = sorted(os.scandir(root.path), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            return [SkippedFolder(str(root.path), f"cannot list: {exc.strerror}")]
        items: list[Found | SkippedFolder] = []
        for entry in entries:
            if entry.name.startswith("."):
                continue  # the store's own: backups, lock, usage, curator state, archive
            path = Path(entry.path)
            if entry.is_symlink():
                items.append(SkippedFolder(str(path), "is a symbolic link, not a folder"))
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue  # a stray file (a README) is not a skill folder
            if not SKILL_NAME.fullmatch(entry.name):
                items.append(
                    SkippedFolder(str(path), f"the name does not match {SKILL_NAME.pattern}")
                )
                continue
            try:
                folder_mtime = entry.stat(follow_symlinks=False).st_mtime_ns
            except OSError:
                continue  # removed while we looked
            item = self._folder(root, path, folder_mtime)
            items.append(SkippedFolder(str(path), item) if isinstance(item, str) else item)
        return items

    def _folder(self, root: Root, path: Path, folder_mtime: int) -> Found | str:
        try:
            info = os.lstat(path / SKILL_FILE)
        except FileNotFoundError:
            return f"no {SKILL_FILE}"
        except OSError as exc:
            return f"{SKILL_FILE}: cannot read: {exc.strerror}"
        if not stat.S_ISREG(info.st_mode):
            return f"{SKILL_FILE} is not a regular file (a link or folder)"
        key = (folder_mtime, info.st_mtime_ns, info.st_size)
        cached = self._cache.get(path)
        if cached is not None and cached[0] == key:
            hit = cached[1]
            if isinstance(hit, str) or (hit.scope == root.scope and hit.plugin == root.plugin):
                return hit
        result = self._parse(root, path, info)
        with self._lock:
            self._cache[path] = (key, result)
        return result

    @staticmethod
    def _parse(root: Root, path: Path, info: os.stat_result) -> Found | str:
        if info.st_size > SKILL_MD_MAX:
            return f"{SKILL_FILE} is larger than {SKILL_MD_MAX // 1024} KB"
        try:
            text = read_regular(path / SKILL_FILE)
        except (OSError, UnicodeDecodeError) as exc:
            return f"{SKILL_FILE}: cannot read: {getattr(exc, 'strerror', None) or exc}"
        parsed = parse_skill_md(text, path.name)
        if isinstance(parsed, str):
            return parsed
        return Found(
            name=path.name,
            folder=path,
            scope=root.scope,
            description=parsed.description,
            pinned=parsed.pinned,
            updated=rfc3339(info.st_mtime_ns / 1e9),
            plugin=root.plugin,
            warning=parsed.warning,
        )


def read_regular(path: Path) -> str:
    """A file's UTF-8 text, opened without following a symlink at its last step."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        return handle.read().decode("utf-8")


def supporting_files(folder: Path, *, limit: int = 200) -> tuple[str, ...]:
    """A skill's files other than SKILL.md (and its .bak), relative and sorted; links and
    dot-files are left out, and at most `limit` are listed."""
    found: list[str] = []

    def walk(current: Path, prefix: str) -> None:
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if len(found) >= limit:
                return
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            relative = f"{prefix}{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                walk(Path(entry.path), relative + "/")
            elif entry.is_file(follow_symlinks=False) and relative not in (
                SKILL_FILE,
                SKILL_FILE + ".bak",
            ):
                found.append(relative)

    walk(folder, "")
    return tuple(sorted(found))
