"""The search_files engine: regular-expression search of file contents.

It runs ripgrep when ``rg`` is on PATH; otherwise a Python walker (in a thread)
that skips hidden entries, symlinks, .git, binary files (a NUL in the first
8 KB) and files over 5 MB, honours .gitignore files at every level, and gives up
after 200,000 files or 60 seconds. Either way, results stop at ``max_results``
and lines are cut at 300 characters.

Paths in results are relative to ``root`` (the workspace), '/'-separated. The
caller resolves and checks ``path`` before calling.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import time
from base64 import b64decode
from dataclasses import dataclass, field
from pathlib import Path

from habakkuk.tools.gitignore import Gitignore, glob_to_regex

__all__ = ["SearchError", "SearchMatch", "SearchResult", "search_files"]

DEFAULT_MAX_RESULTS = 200
MAX_RESULTS_CAP = 2000
LINE_CUT = 300
MAX_FILE_BYTES = 5 * 1024 * 1024
BINARY_SNIFF_BYTES = 8 * 1024
# Read at call time, so tests can lower them.
WALK_MAX_FILES = 200_000
WALK_TIME_LIMIT = 60.0
RG_TIME_LIMIT = 60.0
# rg prints a whole matching line as one JSON line; a 5 MB minified file can make a big one.
_RG_LINE_LIMIT = 64 * 1024 * 1024


class SearchError(Exception):
    """A search that cannot run (bad pattern, bad glob, missing path); one line for the model."""


@dataclass(frozen=True)
class SearchMatch:
    """One matching line."""

    path: str
    line: int
    text: str


@dataclass
class SearchResult:
    """Matching lines (or, with files_only, matching files) and whether the list is whole."""

    matches: list[SearchMatch] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    files_only: bool = False
    truncated: bool = False
    # Why the search stopped early (time or file limit), when it did.
    incomplete: str | None = None
    engine: str = "walker"

    def render(self) -> str:
        """The compact text the model reads: ``path:line: text`` lines and closing notes."""
        if self.files_only:
            lines = list(self.files)
            unit = "files"
        else:
            lines = [f"{m.path}:{m.line}: {m.text}" for m in self.matches]
            unit = "matches"
        if not lines:
            lines = ["No matches."]
        if self.truncated:
            count = len(self.files if self.files_only else self.matches)
            lines.append(
                f"[Stopped at {count} {unit}; there are more. Narrow the pattern, path or glob, "
                f"or raise max_results (at most {MAX_RESULTS_CAP}).]"
            )
        if self.incomplete:
            lines.append(f"[Search incomplete: {self.incomplete}.]")
        return "\n".join(lines)


def _cut(text: str) -> str:
    text = text.rstrip("\r\n")
    if len(text) > LINE_CUT:
        return text[:LINE_CUT] + "…"
    return text


def _rel(path: Path, root: Path) -> str:
    try:
        rel = path.relative_to(root)
    except ValueError:
        rel = Path(os.path.relpath(path, root))
    text = rel.as_posix()
    return "" if text == "." else text


async def search_files(
    pattern: str,
    root: Path,
    *,
    path: Path | None = None,
    glob: str | None = None,
    ignore_case: bool = False,
    files_only: bool = False,
    max_results: int = DEFAULT_MAX_RESULTS,
    use_rg: bool | None = None,
) -> SearchResult:
    """Search file contents under ``path`` (default ``root``) for the regex ``pattern``.

    ``glob`` limits which files are searched (ripgrep syntax; a leading '!' excludes);
    without a '/', it matches file names at any depth, otherwise paths from ``root``.
    ``use_rg`` forces ripgrep (True) or the Python walker (False); None picks rg when
    it is on PATH. Raises SearchError for a bad pattern or glob or a missing path.
    """
    if not pattern:
        raise SearchError("pattern is empty")
    limit = max(1, min(int(max_results), MAX_RESULTS_CAP))
    root = Path(root)
    target = Path(path) if path is not None else root
    if not await asyncio.to_thread(target.exists):
        raise SearchError(f"search path {_rel(target, root) or target} does not exist")
    rg = shutil.which("rg") if use_rg is not False else None
    if use_rg and rg is None:
        raise SearchError("ripgrep (rg) is not on PATH")
    if rg is not None:
        return await _search_rg(rg, pattern, root, target, glob, ignore_case, files_only, limit)
    regex = _compile(pattern, ignore_case)
    matcher = _GlobFilter.parse(glob) if glob else None
    return await asyncio.to_thread(_search_walk, regex, root, target, matcher, files_only, limit)


def _compile(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        where = f" at position {exc.pos}" if exc.pos is not None else ""
        raise SearchError(f"invalid regular expression {pattern!r}: {exc.msg}{where}") from None


# ---------------------------------------------------------------------------
# ripgrep


async def _search_rg(
    rg: str,
    pattern: str,
    root: Path,
    target: Path,
    glob: str | None,
    ignore_case: bool,
    files_only: bool,
    limit: int,
) -> SearchResult:
    # rg runs in root with a relative target, so its paths and its globs are relative
    # to the workspace, the same as the walker's.
    rel_target = _rel(target, root) or "."
    args = [rg, "--no-config", "--no-messages", "--crlf", "--sort", "path", "--no-require-git"]
    # Not the user's global git excludes: the walker cannot see them, and results should
    # not depend on which engine ran. (Parent folders' .gitignore files must stay on, or a
    # search of a subfolder would miss the workspace's own .gitignore.)
    args += ["--no-ignore-global", "--max-filesize", "5M"]
    args += ["--files-with-matches", "--null"] if files_only else ["--json"]
    if ignore_case:
        args.append("--ignore-case")
    if glob:
        args += ["--glob", glob]
    args += ["-e", pattern, "--", rel_target]
    env = {k: v for k, v in os.environ.items() if k != "RIPGREP_CONFIG_PATH"}

    result = SearchResult(files_only=files_only, engine="rg")
    proc = await asyncio.create_subprocess_exec(
        *args,
        cwd=root,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=_RG_LINE_LIMIT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    stderr_task = asyncio.create_task(proc.stderr.read())
    stopped_early = False
    read_to_end = False
    try:
        try:
            async with asyncio.timeout(RG_TIME_LIMIT):
                if files_only:
                    stopped_early = await _read_rg_files(proc.stdout, result, limit)
                else:
                    stopped_early = await _read_rg_json(proc.stdout, result, limit)
        except TimeoutError:
            stopped_early = True
            result.incomplete = f"ripgrep stopped after {RG_TIME_LIMIT:g} seconds"
        read_to_end = not stopped_early
    finally:
        # Killing only when rg is not done keeps its exit status (2 on a bad pattern).
        if not read_to_end and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        await proc.wait()
        stderr = (await stderr_task).decode("utf-8", errors="replace")

    if proc.returncode == 2 and not stopped_early and stderr.strip():
        raise SearchError(_rg_error(pattern, glob, stderr))
    return result


def _rg_text(obj: dict[str, str] | None) -> str:
    """rg's JSON gives text as {"text": ...}, or {"bytes": base64} when not UTF-8."""
    if not obj:
        return ""
    if "text" in obj:
        return obj["text"]
    return b64decode(obj.get("bytes", "")).decode("utf-8", errors="replace")


def _clean_rg_path(path: str) -> str:
    return path[2:] if path.startswith("./") else path


async def _read_rg_json(stream: asyncio.StreamReader, result: SearchResult, limit: int) -> bool:
    async for raw in stream:
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if event.get("type") != "match":
            continue
        data = event.get("data", {})
        if len(result.matches) >= limit:
            result.truncated = True
            return True
        result.matches.append(
            SearchMatch(
                path=_clean_rg_path(_rg_text(data.get("path"))),
                line=int(data.get("line_number") or 0),
                text=_cut(_rg_text(data.get("lines"))),
            )
        )
    return False


async def _read_rg_files(stream: asyncio.StreamReader, result: SearchResult, limit: int) -> bool:
    while True:
        try:
            chunk = await stream.readuntil(b"\0")
        except asyncio.IncompleteReadError as exc:
            chunk = exc.partial
            if not chunk:
                return False
        name = os.fsdecode(chunk.rstrip(b"\0").rstrip(b"\n"))
        if not name:
            continue
        if len(result.files) >= limit:
            result.truncated = True
            return True
        result.files.append(_clean_rg_path(name))


def _rg_error(pattern: str, glob: str | None, stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if "regex parse error" in stderr or "regex" in lines[0].lower():
        detail = next(
            (line.removeprefix("error:").strip() for line in lines if line.startswith("error:")),
            lines[-1],
        )
        return f"invalid regular expression {pattern!r}: {detail}"
    if glob is not None and "glob" in stderr:
        return f"invalid glob {glob!r}: {lines[-1].removeprefix('rg: ')}"
    return f"search failed: {lines[0].removeprefix('rg: ')}"


# ---------------------------------------------------------------------------
# The Python walker


@dataclass(frozen=True)
class _GlobFilter:
    """ripgrep-style --glob: include matching files, or with '!' exclude files and folders."""

    regex: re.Pattern[str]
    exclude: bool
    by_name: bool

    @classmethod
    def parse(cls, glob: str) -> _GlobFilter:
        exclude = glob.startswith("!")
        body = glob[1:] if exclude else glob
        by_name = "/" not in body.rstrip("/")
        body = body.strip("/") if not by_name else body.rstrip("/")
        if not body:
            raise SearchError(f"invalid glob {glob!r}: it is empty")
        try:
            regex = re.compile(glob_to_regex(body, braces=True, strict=True))
        except (ValueError, re.error) as exc:
            raise SearchError(f"invalid glob {glob!r}: {exc}") from None
        return cls(regex, exclude, by_name)

    def _hit(self, rel: str) -> bool:
        subject = rel.rsplit("/", 1)[-1] if self.by_name else rel
        return self.regex.fullmatch(subject) is not None

    def allows_file(self, rel: str) -> bool:
        return self._hit(rel) != self.exclude

    def allows_dir(self, rel: str) -> bool:
        # An include glob never prunes folders (their files may match); an exclude one does.
        return not (self.exclude and self._hit(rel))


def _sorted_entries(path: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError:
        return []


def _search_walk(
    regex: re.Pattern[str],
    root: Path,
    target: Path,
    glob: _GlobFilter | None,
    files_only: bool,
    limit: int,
) -> SearchResult:
    result = SearchResult(files_only=files_only, engine="walker")
    deadline = time.monotonic() + WALK_TIME_LIMIT
    max_files = WALK_MAX_FILES
    seen = 0

    def search_file(file_path: str, rel: str) -> bool:
        """Search one file; return True when the result is full."""
        try:
            with open(file_path, "rb") as fh:
                head = fh.read(BINARY_SNIFF_BYTES)
                if b"\0" in head:
                    return False
                data = head + fh.read(MAX_FILE_BYTES + 1 - len(head))
        except OSError:
            return False
        if len(data) > MAX_FILE_BYTES:
            return False
        text = data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        for number, line in enumerate(lines, 1):
            line = line.removesuffix("\r")
            if regex.search(line) is None:
                continue
            if files_only:
                if len(result.files) >= limit:
                    result.truncated = True
                    return True
                result.files.append(rel)
                return False
            if len(result.matches) >= limit:
                result.truncated = True
                return True
            result.matches.append(SearchMatch(rel, number, _cut(line)))
        return False

    if target.is_file():
        # A file named explicitly is searched even if hidden or ignored, as rg does.
        try:
            too_big = target.stat().st_size > MAX_FILE_BYTES
        except OSError:
            too_big = True
        if not too_big:
            search_file(str(target), _rel(target, root))
        return result

    frames = [_Frame(_sorted_entries(str(target)), _rel(target, root), _ignore_chain(root, target))]
    while frames:
        frame = frames[-1]
        if frame.index >= len(frame.entries):
            frames.pop()
            continue
        entry = frame.entries[frame.index]
        frame.index += 1
        name = entry.name
        if name.startswith("."):
            continue  # hidden entries, .git and .gitignore itself
        rel = f"{frame.rel}/{name}" if frame.rel else name
        try:
            if entry.is_symlink():
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            if not is_dir and not entry.is_file(follow_symlinks=False):
                continue
        except OSError:
            continue
        if frame.rules.match(rel, is_dir):
            continue
        if is_dir:
            if glob is None or glob.allows_dir(rel):
                rules = frame.rules.with_file(Path(entry.path) / ".gitignore", rel)
                frames.append(_Frame(_sorted_entries(entry.path), rel, rules))
            continue
        seen += 1
        if seen > max_files:
            result.incomplete = f"gave up after {max_files:,} files"
            break
        if time.monotonic() > deadline:
            result.incomplete = f"gave up after {WALK_TIME_LIMIT:g} seconds"
            break
        if glob is not None and not glob.allows_file(rel):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_size > MAX_FILE_BYTES:
                continue
        except OSError:
            continue
        if search_file(entry.path, rel):
            break
    return result


@dataclass
class _Frame:
    """One folder being walked: its sorted entries, the next one, its path and rules."""

    entries: list[os.DirEntry[str]]
    rel: str
    rules: Gitignore
    index: int = 0


def _ignore_chain(root: Path, target: Path) -> Gitignore:
    """The .gitignore rules of root and every folder down to target, outermost first."""
    rules = Gitignore().with_file(root / ".gitignore", "")
    try:
        inner = target.relative_to(root)
    except ValueError:
        return Gitignore().with_file(target / ".gitignore", _rel(target, root))
    folder = root
    for part in inner.parts:
        folder = folder / part
        rules = rules.with_file(folder / ".gitignore", _rel(folder, root))
    return rules
