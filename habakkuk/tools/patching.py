"""The apply_patch engine: parse a patch and apply it to files, all or nothing.

Two input formats are accepted:

* a unified diff (git-style ``diff --git`` sections or plain ``---``/``+++`` headers,
  ``@@ -l,n +l,n @@`` hunks, ``/dev/null`` for added and deleted files, git's
  ``rename from``/``rename to``), and
* the ``*** Begin Patch`` / ``*** End Patch`` format (``*** Add File:``,
  ``*** Update File:`` with an optional ``*** Move to:``, ``*** Delete File:``,
  hunks under optional ``@@ <context line>`` headers, ``*** End of File``).

Hunks are located by their text, never trusted by line number: an exact match
first, then ignoring trailing whitespace, then ignoring surrounding whitespace.
Every hunk of every file is applied in memory before the first byte is
written, so a patch that does not apply leaves the files untouched.

The module is pure: it knows nothing about workspaces or permissions. The
caller passes ``resolve`` to map patch paths to absolute paths (and to refuse
paths it does not allow).
"""

from __future__ import annotations

import re
import stat
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from habakkuk.engine.toolkit.registry import ToolError
from habakkuk.tools.safe_open import Confinement, delete, write_atomic

__all__ = [
    "FilePatch",
    "Hunk",
    "PatchError",
    "PatchResult",
    "apply_patch",
    "parse_patch",
    "patch_paths",
]


class PatchError(Exception):
    """A patch that cannot be parsed or applied. The message is one line meant for the model."""


@dataclass
class Hunk:
    """One hunk: lines tagged ' ' (context), '-' (removed) or '+' (added)."""

    lines: list[tuple[str, str]] = field(default_factory=list)
    # From a unified header: the 1-based old start line and old line count.
    old_start: int | None = None
    old_count: int | None = None
    # `@@ <line>` headers of the Begin Patch format: lines the hunk follows, in order.
    contexts: list[str] = field(default_factory=list)
    # `*** End of File`: the hunk's old side should end at the end of the file.
    end_of_file: bool = False
    old_no_newline: bool = False
    new_no_newline: bool = False
    header: str = ""

    @property
    def old_lines(self) -> list[str]:
        """The lines the hunk expects to find (context and removed)."""
        return [text for op, text in self.lines if op != "+"]

    @property
    def new_lines(self) -> list[str]:
        """The lines the hunk leaves in their place (context and added)."""
        return [text for op, text in self.lines if op != "-"]


@dataclass
class FilePatch:
    """The change to one file. For ``add`` the content is the '+' lines of ``hunks``."""

    kind: Literal["add", "update", "delete"]
    path: str
    move_to: str | None = None
    hunks: list[Hunk] = field(default_factory=list)


@dataclass
class PatchResult:
    """What an applied patch changed, as the paths the patch named."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    moved: list[tuple[str, str]] = field(default_factory=list)
    summary: str = ""


# ---------------------------------------------------------------------------
# Parsing


def parse_patch(text: str) -> list[FilePatch]:
    """Parse a unified diff or a ``*** Begin Patch`` patch into per-file changes.

    Raises PatchError with the offending line when the patch is malformed or changes nothing.
    """
    lines = text.replace("\r\n", "\n").split("\n")
    for index, line in enumerate(lines):
        if line.rstrip() == "*** Begin Patch":
            patches = _parse_begin_patch(lines, index)
            break
    else:
        if any(_BP_FILE_HEADER.match(line) for line in lines):
            raise PatchError("patch has '*** ... File:' lines but no '*** Begin Patch' line")
        patches = _parse_unified(lines)
    if not patches:
        raise PatchError(
            "patch contains no file changes (expected a unified diff or a *** Begin Patch block)"
        )
    return patches


def patch_paths(patch_text: str) -> list[str]:
    """Every path the patch touches, move targets included, in order and without repeats."""
    return _paths_of(parse_patch(patch_text))


def _paths_of(patches: list[FilePatch]) -> list[str]:
    seen: dict[str, None] = {}
    for fp in patches:
        seen.setdefault(fp.path, None)
        if fp.move_to is not None:
            seen.setdefault(fp.move_to, None)
    return list(seen)


_BP_FILE_HEADER = re.compile(r"^\*\*\* (Add File|Update File|Delete File|Move to):\s*(.*?)\s*$")
_UNIFIED_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _finish_hunk_check(fp: FilePatch, lineno: int) -> None:
    for number, hunk in enumerate(fp.hunks, 1):
        if not hunk.lines:
            raise PatchError(f"line {lineno}: {fp.path}: hunk {number} has no lines")


def _parse_begin_patch(lines: list[str], start: int) -> list[FilePatch]:
    patches: list[FilePatch] = []
    current: FilePatch | None = None
    hunk: Hunk | None = None
    # Bare empty lines are taken as empty context (or content) lines only when more
    # hunk lines follow; trailing ones are usually just separators.
    pending_blank = 0

    def flush_blank() -> None:
        nonlocal pending_blank
        if hunk is not None and current is not None:
            op = "+" if current.kind == "add" else " "
            hunk.lines.extend((op, "") for _ in range(pending_blank))
        pending_blank = 0

    def close(lineno: int) -> None:
        nonlocal current, hunk, pending_blank
        pending_blank = 0
        if current is not None:
            if current.kind == "update":
                _finish_hunk_check(current, lineno)
                if not current.hunks and current.move_to is None:
                    raise PatchError(f"line {lineno}: *** Update File: {current.path} has no hunks")
            patches.append(current)
        current = None
        hunk = None

    for index in range(start + 1, len(lines)):
        raw = lines[index]
        lineno = index + 1
        if raw.startswith("***"):
            marker = raw.rstrip()
            if marker == "*** End Patch":
                close(lineno)
                return patches
            if marker == "*** End of File":
                if current is None or current.kind != "update" or hunk is None:
                    raise PatchError(f"line {lineno}: *** End of File outside an update hunk")
                pending_blank = 0
                hunk.end_of_file = True
                continue
            m = _BP_FILE_HEADER.match(raw)
            if m is None:
                raise PatchError(f"line {lineno}: unknown patch line {raw!r}")
            what, path = m.group(1), m.group(2)
            if not path:
                raise PatchError(f"line {lineno}: {raw.strip()!r} has no path")
            if what == "Move to":
                if current is None or current.kind != "update" or current.hunks:
                    raise PatchError(
                        f"line {lineno}: *** Move to: must directly follow *** Update File:"
                    )
                current.move_to = path
                continue
            close(lineno)
            if what == "Add File":
                current = FilePatch("add", path)
                hunk = Hunk()
                current.hunks.append(hunk)
            elif what == "Update File":
                current = FilePatch("update", path)
            else:
                current = FilePatch("delete", path)
            continue
        if current is None:
            if raw.strip():
                raise PatchError(
                    f"line {lineno}: expected *** Add File:, *** Update File:, "
                    f"*** Delete File: or *** End Patch, found {raw!r}"
                )
            continue
        if raw == "":
            if current.kind != "delete":
                pending_blank += 1
            continue
        if raw.startswith("\\"):
            flush_blank()
            if hunk is not None:
                _mark_no_newline(hunk)
            continue
        if current.kind == "delete":
            raise PatchError(f"line {lineno}: unexpected line after *** Delete File: {raw!r}")
        if current.kind == "add":
            if not raw.startswith("+"):
                raise PatchError(
                    f"line {lineno}: lines of *** Add File: {current.path} must start with '+', "
                    f"found {raw!r}"
                )
            flush_blank()
            assert hunk is not None
            hunk.lines.append(("+", raw[1:]))
            continue
        # An update.
        if raw.startswith("@@"):
            pending_blank = 0
            # Consecutive @@ lines narrow the search step by step (class, then method).
            if hunk is None or hunk.lines:
                hunk = Hunk(header=raw.strip())
                current.hunks.append(hunk)
            else:
                hunk.header = f"{hunk.header} {raw.strip()}".strip()
            m = _UNIFIED_HUNK.match(raw)
            if m is not None:
                hunk.old_start = int(m.group(1))
                hunk.old_count = int(m.group(2)) if m.group(2) is not None else 1
            else:
                context = raw[3:] if raw.startswith("@@ ") else raw[2:]
                if context.strip():
                    hunk.contexts.append(context)
            continue
        if raw[0] in " -+":
            if hunk is None:
                hunk = Hunk()
                current.hunks.append(hunk)
            flush_blank()
            hunk.lines.append((raw[0], raw[1:]))
            continue
        raise PatchError(
            f"line {lineno}: unexpected line in *** Update File: {current.path}: {raw!r} "
            "(hunk lines start with ' ', '-' or '+')"
        )
    raise PatchError("patch has no '*** End Patch' line (was it cut off?)")


def _mark_no_newline(hunk: Hunk) -> None:
    """Apply a ``\\ No newline at end of file`` marker to the side of the line before it."""
    if not hunk.lines:
        return
    op = hunk.lines[-1][0]
    if op in " -":
        hunk.old_no_newline = True
    if op in " +":
        hunk.new_no_newline = True


@dataclass
class _Section:
    git: bool
    old: str | None = None
    new: str | None = None
    has_file_header: bool = False
    rename_from: str | None = None
    rename_to: str | None = None
    new_file: bool = False
    deleted_file: bool = False
    binary: bool = False
    hunks: list[Hunk] = field(default_factory=list)
    lineno: int = 0


def _unquote(path: str) -> str:
    """Undo git's C-style quoting of unusual paths ("a/with\\ttab")."""
    if len(path) >= 2 and path[0] == '"' and path[-1] == '"':
        inner = path[1:-1]
        try:
            raw = inner.encode("latin-1", "backslashreplace").decode("unicode_escape")
            return raw.encode("latin-1").decode("utf-8")
        except (UnicodeError, ValueError):
            return inner
    return path


def _header_path(text: str) -> str:
    # A tab separates the path from an optional timestamp (diff -u).
    return _unquote(text.split("\t", 1)[0].rstrip())


def _git_header_paths(rest: str) -> tuple[str | None, str | None]:
    rest = rest.strip()
    if rest.startswith('"'):
        end = rest.find('"', 1)
        while end > 0 and rest[end - 1] == "\\":
            end = rest.find('"', end + 1)
        if end > 0:
            return _unquote(rest[: end + 1]), _unquote(rest[end + 1 :].strip())
    # "a/P b/P": the common case has the same path twice.
    if rest.startswith("a/") and len(rest) % 2 == 1:
        size = (len(rest) - 5) // 2
        first, second = rest[: size + 2], rest[size + 3 :]
        if second.startswith("b/") and first[2:] == second[2:]:
            return first, second
    if " b/" in rest:
        first, _, second = rest.partition(" b/")
        return first, "b/" + second
    return None, None


def _strip_prefixes(sec: _Section) -> tuple[str | None, str | None]:
    old, new = sec.old, sec.new
    old = None if old == "/dev/null" else old
    new = None if new == "/dev/null" else new
    strip = sec.git or (
        (old is None or old.startswith("a/"))
        and (new is None or new.startswith("b/"))
        and (old is not None or new is not None)
    )
    if strip:
        if old is not None and old.startswith("a/"):
            old = old[2:]
        if new is not None and new.startswith("b/"):
            new = new[2:]
    return old, new


def _section_to_patch(sec: _Section) -> FilePatch | None:
    old, new = _strip_prefixes(sec)
    if sec.binary:
        raise PatchError(f"{new or old}: binary patches are not supported")
    if sec.rename_from is not None and sec.rename_to is not None:
        old, new = sec.rename_from, sec.rename_to
    if sec.new_file or (old is None and new is not None):
        assert new is not None
        return FilePatch("add", new, hunks=sec.hunks)
    if sec.deleted_file or (new is None and old is not None):
        assert old is not None
        return FilePatch("delete", old, hunks=sec.hunks)
    if old is None or new is None:
        raise PatchError(f"line {sec.lineno}: diff section has no file names")
    move_to = new if new != old else None
    if not sec.hunks and move_to is None:
        return None  # a mode-only change: nothing to do to the content
    return FilePatch("update", old, move_to=move_to, hunks=sec.hunks)


def _is_file_header(lines: list[str], i: int) -> bool:
    return lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")


def _ends_hunk(lines: list[str], i: int) -> bool:
    line = lines[i]
    return line.startswith(("@@", "diff ", "Index: ")) or _is_file_header(lines, i)


def _parse_unified_hunk(lines: list[str], i: int) -> tuple[Hunk, int]:
    header = lines[i]
    if header.startswith("@@@"):
        raise PatchError(f"line {i + 1}: combined diffs ({header!r}) are not supported")
    hunk = Hunk(header=header.strip())
    m = _UNIFIED_HUNK.match(header)
    counted = m is not None
    old_left = new_left = 0
    if m is not None:
        hunk.old_start = int(m.group(1))
        old_left = int(m.group(2)) if m.group(2) is not None else 1
        new_left = int(m.group(4)) if m.group(4) is not None else 1
        hunk.old_count = old_left
    else:
        # A header without numbers ("@@" or "@@ def f():"): what follows is context.
        context = header[2:].strip().removesuffix("@@").strip()
        if context:
            hunk.contexts.append(context)
    i += 1
    n = len(lines)
    while i < n:
        line = lines[i]
        if line.startswith("\\"):
            _mark_no_newline(hunk)
            i += 1
            continue
        if counted and (old_left > 0 or new_left > 0):
            # Trust the counts, but a new hunk, a new file, or a next file's header
            # followed by a hunk means the counts were wrong.
            if line.startswith(("@@", "diff --git ")):
                break
            if _is_file_header(lines, i) and i + 2 < n and lines[i + 2].startswith("@@"):
                break
            if line == "":
                op, text = " ", ""
            elif line[0] in " -+":
                op, text = line[0], line[1:]
            else:
                break
        else:
            # Counts used up (or absent): keep going only while lines still look like a
            # hunk, so a miscounted hunk is not silently cut short.
            if _ends_hunk(lines, i):
                break
            if line == "":
                j = i
                while j < n and lines[j] == "":
                    j += 1
                if j >= n or _ends_hunk(lines, j) or lines[j][0] not in " -+":
                    break
                op, text = " ", ""
            elif line[0] in " -+":
                op, text = line[0], line[1:]
            else:
                break
        hunk.lines.append((op, text))
        if op != "+":
            old_left -= 1
        if op != "-":
            new_left -= 1
        i += 1
    return hunk, i


def _parse_unified(lines: list[str]) -> list[FilePatch]:
    patches: list[FilePatch] = []
    sec: _Section | None = None

    def flush() -> None:
        if sec is not None:
            fp = _section_to_patch(sec)
            if fp is not None:
                patches.append(fp)

    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        if line.startswith("diff --git "):
            flush()
            sec = _Section(git=True, lineno=i + 1)
            sec.old, sec.new = _git_header_paths(line[len("diff --git ") :])
            i += 1
            continue
        if _is_file_header(lines, i):
            if sec is None or sec.has_file_header or sec.hunks:
                flush()
                sec = _Section(git=False, lineno=i + 1)
            sec.old = _header_path(line[4:])
            sec.new = _header_path(lines[i + 1][4:])
            sec.has_file_header = True
            i += 2
            continue
        if line.startswith("@@"):
            if sec is None:
                raise PatchError(
                    f"line {i + 1}: hunk {line.strip()!r} comes before any file header "
                    "('--- a/path' and '+++ b/path')"
                )
            hunk, i = _parse_unified_hunk(lines, i)
            if hunk.lines:
                sec.hunks.append(hunk)
            continue
        if sec is not None and sec.git and not sec.hunks:
            if line.startswith("new file mode"):
                sec.new_file = True
            elif line.startswith("deleted file mode"):
                sec.deleted_file = True
            elif line.startswith("rename from "):
                sec.rename_from = _unquote(line[len("rename from ") :].rstrip())
            elif line.startswith("rename to "):
                sec.rename_to = _unquote(line[len("rename to ") :].rstrip())
            elif line.startswith(("Binary files ", "GIT binary patch")):
                sec.binary = True
        # Anything else (index lines, prose, code fences) is not part of the patch.
        i += 1
    flush()
    return patches


# ---------------------------------------------------------------------------
# Applying


@dataclass
class _Text:
    lines: list[str]
    eof_newline: bool
    eol: str = "\n"
    mode: int | None = None


def _decode(data: bytes) -> _Text:
    # surrogateescape round-trips bytes that are not UTF-8 untouched.
    text = data.decode("utf-8", errors="surrogateescape")
    crlf = text.count("\r\n")
    eol = "\r\n" if crlf and crlf * 2 >= text.count("\n") else "\n"
    if eol == "\r\n":
        text = text.replace("\r\n", "\n")
    if text == "":
        return _Text([], True, eol)
    eof_newline = text.endswith("\n")
    lines = text.split("\n")
    if eof_newline:
        lines.pop()
    return _Text(lines, eof_newline, eol)


def _encode(t: _Text) -> bytes:
    if not t.lines:
        return b""
    body = "\n".join(t.lines) + ("\n" if t.eof_newline else "")
    if t.eol == "\r\n":
        body = body.replace("\n", "\r\n")
    return body.encode("utf-8", errors="surrogateescape")


def _normalisers() -> list[Callable[[str], str]]:
    # Exact, then ignoring trailing whitespace, then ignoring surrounding whitespace.
    return [lambda s: s, str.rstrip, str.strip]


def _matches_at(file_norm: list[str], old_norm: list[str], pos: int) -> bool:
    if pos < 0 or pos + len(old_norm) > len(file_norm):
        return False
    return all(file_norm[pos + j] == old_norm[j] for j in range(len(old_norm)))


def _find_all(file_norm: list[str], old_norm: list[str], start: int) -> list[int]:
    last = len(file_norm) - len(old_norm)
    first_line = old_norm[0]
    return [
        pos
        for pos in range(max(start, 0), last + 1)
        if file_norm[pos] == first_line and _matches_at(file_norm, old_norm, pos)
    ]


def _find_line(lines: list[str], wanted: str, start: int) -> int | None:
    for norm in _normalisers():
        target = norm(wanted)
        for pos in range(start, len(lines)):
            if norm(lines[pos]) == target:
                return pos
    return None


def _describe_hunk(hunk: Hunk, number: int, total: int) -> str:
    shown = " | ".join(repr(op + text) for op, text in hunk.lines[:3])
    more = " | ..." if len(hunk.lines) > 3 else ""
    header = f" ({hunk.header})" if hunk.header else ""
    return f"hunk {number} of {total}{header}, which begins {shown}{more},"


def _diagnose(lines: list[str], old: list[str], start: int, target: int | None) -> str:
    """Say where the hunk came closest to matching and the first line that differs."""
    file_norm = [line.strip() for line in lines]
    old_norm = [line.strip() for line in old]
    positions: dict[str, list[int]] = {}
    for pos, text in enumerate(file_norm):
        positions.setdefault(text, []).append(pos)
    scores: Counter[int] = Counter()
    for j, text in enumerate(old_norm):
        for pos in positions.get(text, ()):
            if pos - j >= 0:
                scores[pos - j] += 1
    if not scores:
        return "none of its lines were found in the file"
    anchor = target if target is not None else start

    def rank(item: tuple[int, int]) -> tuple[int, int, int, int]:
        begin, score = item
        # Places after the previous hunk first; then the most lines in common.
        return (begin < start, -score, abs(begin - anchor), begin)

    begin, score = min(scores.items(), key=rank)
    if score * 2 < len(old):
        where = f" after line {start}" if start > 0 else ""
        return f"no place{where} matches more than {score} of its {len(old)} old lines"
    if begin < start:
        return (
            f"its closest match starts at line {begin + 1}, which overlaps the previous hunk "
            f"(that one ends at line {start}); hunks must follow file order without overlapping"
        )
    for j, text in enumerate(old_norm):
        at = begin + j
        if at >= len(lines):
            return (
                f"lines from line {begin + 1} match up to its old line {j + 1}, "
                f"which should be {old[j]!r} but the file ends"
            )
        if file_norm[at] != text:
            return (
                f"the closest match starts at line {begin + 1}; its old line {j + 1} differs: "
                f"expected {old[j]!r}, found {lines[at]!r} (line {at + 1})"
            )
    return f"it matches at line {begin + 1}"  # pragma: no cover - a match would have applied


def _locate(label: str, lines: list[str], hunk: Hunk, number: int, total: int, cursor: int) -> int:
    """Return the index where the hunk's old lines start, or raise PatchError."""
    search_from = cursor
    body_from = cursor
    for context in hunk.contexts:
        found = _find_line(lines, context, search_from)
        if found is None:
            after = f" after line {search_from}" if search_from > 0 else ""
            raise PatchError(
                f"{label}: {_describe_hunk(hunk, number, total)} does not apply: "
                f"its @@ context line {context!r} was not found{after}. Nothing was written."
            )
        search_from = found + 1
        body_from = found

    old = hunk.old_lines
    if not old:
        # A pure insertion: after the context line, at the stated line, or at the end.
        if hunk.contexts:
            return search_from
        if hunk.old_start is not None:
            at = hunk.old_start if hunk.old_count == 0 else hunk.old_start - 1
            return min(max(at, cursor), len(lines))
        return len(lines)

    target: int | None = None
    if hunk.old_start is not None:
        target = hunk.old_start - 1 if hunk.old_count != 0 else hunk.old_start
    anchored_end = hunk.end_of_file or hunk.old_no_newline
    eof_pos = len(lines) - len(old)
    normalisers = _normalisers()
    if anchored_end and eof_pos >= body_from:
        for norm in normalisers:
            if _matches_at([norm(x) for x in lines], [norm(x) for x in old], eof_pos):
                return eof_pos
    for norm in normalisers:
        candidates = _find_all([norm(x) for x in lines], [norm(x) for x in old], body_from)
        if candidates:
            if target is None:
                return candidates[0]
            return min(candidates, key=lambda pos: (abs(pos - target), pos))
    raise PatchError(
        f"{label}: {_describe_hunk(hunk, number, total)} does not apply: "
        f"{_diagnose(lines, old, body_from, target)}. Nothing was written."
    )


def _apply_hunks(label: str, text: _Text, hunks: list[Hunk]) -> _Text:
    lines = text.lines
    eof_newline = text.eof_newline
    edits: list[tuple[int, int, list[str]]] = []
    cursor = 0
    for number, hunk in enumerate(hunks, 1):
        start = _locate(label, lines, hunk, number, len(hunks), cursor)
        end = start + len(hunk.old_lines)
        # Context lines keep the file's own text: a whitespace-insensitive match must
        # not reformat lines the hunk did not mean to change.
        replacement: list[str] = []
        at = start
        for op, line in hunk.lines:
            if op == " ":
                replacement.append(lines[at])
            elif op == "+":
                replacement.append(line)
            if op != "+":
                at += 1
        edits.append((start, end, replacement))
        if end == len(lines):
            # The hunk reaches the end of the file, so it decides the final newline.
            if hunk.new_no_newline:
                eof_newline = False
            elif hunk.old_no_newline:
                eof_newline = True
        cursor = end
    result = list(lines)
    for start, end, replacement in reversed(edits):
        result[start:end] = replacement
    return _Text(result, eof_newline, text.eol, text.mode)


def _added_text(fp: FilePatch) -> _Text:
    lines = [text for hunk in fp.hunks for text in hunk.new_lines]
    no_newline = bool(fp.hunks) and fp.hunks[-1].new_no_newline
    return _Text(lines, not no_newline)


def _read(path: Path, label: str) -> _Text | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PatchError(f"{label}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise PatchError(f"{label}: is a directory")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PatchError(f"{label}: cannot read: {exc.strerror or exc}") from None
    text = _decode(data)
    text.mode = stat.S_IMODE(st.st_mode)
    return text


def apply_patch(
    patch_text: str, resolve: Callable[[str], Path], *, confine: Confinement | None = None
) -> PatchResult:
    """Apply a patch to the files ``resolve`` maps its paths to, all or nothing.

    ``resolve`` is called for every path (move targets included) before anything
    is read; whatever it raises propagates. Every hunk is applied in memory first;
    if one fails, PatchError names the file and hunk and nothing is written.
    This does blocking file I/O: async callers run it in a thread. With ``confine``,
    every write and delete lands below its root or is refused (habakkuk.tools.safe_open).
    """
    patches = parse_patch(patch_text)
    resolved = {p: resolve(p) for p in _paths_of(patches)}
    state: dict[Path, _Text | None] = {}  # None: deleted
    labels: dict[Path, str] = {}
    result = PatchResult()
    summary: list[str] = []

    def load(path: Path, label: str) -> _Text | None:
        if path in state:
            return state[path]
        return _read(path, label)

    def note(lst: list[str], code: str, label: str) -> None:
        if label not in lst:
            lst.append(label)
        line = f"{code} {label}"
        if line not in summary:
            summary.append(line)

    for fp in patches:
        src = resolved[fp.path]
        labels.setdefault(src, fp.path)
        if fp.kind == "add":
            if load(src, fp.path) is not None:
                raise PatchError(f"cannot add {fp.path}: it already exists. Nothing was written.")
            state[src] = _added_text(fp)
            note(result.added, "A", fp.path)
        elif fp.kind == "delete":
            if load(src, fp.path) is None:
                raise PatchError(
                    f"cannot delete {fp.path}: it does not exist. Nothing was written."
                )
            state[src] = None
            note(result.deleted, "D", fp.path)
        else:
            current = load(src, fp.path)
            if current is None:
                raise PatchError(
                    f"cannot update {fp.path}: it does not exist. Nothing was written."
                )
            updated = _apply_hunks(fp.path, current, fp.hunks)
            dst = resolved[fp.move_to] if fp.move_to is not None else src
            if fp.move_to is not None and dst != src:
                labels.setdefault(dst, fp.move_to)
                if load(dst, fp.move_to) is not None:
                    raise PatchError(
                        f"cannot move {fp.path} to {fp.move_to}: {fp.move_to} already exists. "
                        "Nothing was written."
                    )
                state[src] = None
                state[dst] = updated
                result.moved.append((fp.path, fp.move_to))
                summary.append(f"R {fp.path} -> {fp.move_to}")
            else:
                state[src] = updated
                note(result.updated, "M", fp.path)

    # Writes before deletes, so a failed write during a move leaves the source in place.
    order = [p for p, c in state.items() if c is not None] + [
        p for p, c in state.items() if c is None
    ]
    written: list[str] = []
    for path in order:
        content = state[path]
        try:
            if content is not None:
                # 0o666 lets the umask decide a new file's mode, as any editor would.
                data = _encode(content)
                write_atomic(
                    path, data, confine=confine, create_mode=0o666, chmod=content.mode, fsync=True
                )
            else:
                delete(path, confine=confine)
        except (OSError, ToolError) as exc:
            done = f" (already changed: {', '.join(written)})" if written else ""
            verb = "write" if content is not None else "delete"
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise PatchError(f"{labels[path]}: cannot {verb}: {why}{done}") from None
        written.append(labels[path])
    result.summary = "\n".join(summary)
    return result
