"""A small .gitignore matcher: globs, ``**``, anchoring, trailing ``/``, ``!`` negation.

Rules from several .gitignore files are kept in one ordered list, parent folders
first, each rule remembering the folder its file lives in. The last rule that
matches a path decides, so deeper files override shallower ones, as in git.

Paths given to the matcher are relative to the tree's root, '/'-separated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Gitignore", "glob_to_regex"]


def glob_to_regex(pattern: str, *, braces: bool = False, strict: bool = False) -> str:
    """Translate a gitignore-style glob into a regular expression for ``fullmatch``.

    ``*`` and ``?`` stop at '/', ``**`` as a whole segment spans folders, ``[...]``
    is a character class (``!`` or ``^`` negates), a backslash escapes. With
    ``braces``, ``{a,b}`` means either alternative (ripgrep's --glob has this).
    An unclosed ``[`` or ``{`` is literal, as in git, or with ``strict`` a ValueError.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                j = i + 2
                starts_segment = i == 0 or pattern[i - 1] == "/"
                if starts_segment and j == n:
                    out.append(".*")
                    i = j
                    continue
                if starts_segment and pattern[j] == "/":
                    out.append("(?:.*/)?")
                    i = j + 1
                    continue
                out.append("[^/]*")
                i = j
                continue
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                if strict:
                    raise ValueError("unclosed character class; missing ']'")
                out.append(re.escape(c))  # an unclosed '[' is literal, as git treats it
                i += 1
                continue
            body = pattern[i + 1 : j]
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            parts = ["^/" if negate else ""]
            parts.extend(ch if ch == "-" else re.escape(ch) for ch in body)
            out.append("[" + "".join(parts) + "]")
            i = j + 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        elif c == "{" and braces:
            close, alternatives = _split_braces(pattern, i)
            if close < 0:
                if strict:
                    raise ValueError("unclosed alternate group; missing '}'")
                out.append(re.escape(c))
                i += 1
                continue
            out.append(
                "(?:"
                + "|".join(glob_to_regex(a, braces=True, strict=strict) for a in alternatives)
                + ")"
            )
            i = close + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _split_braces(pattern: str, start: int) -> tuple[int, list[str]]:
    """Find the '}' closing the '{' at start and the comma-separated parts inside."""
    depth = 0
    parts: list[str] = []
    current: list[str] = []
    i = start + 1
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            current.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            if depth == 0:
                parts.append("".join(current))
                return i, parts
            depth -= 1
        elif c == "," and depth == 0:
            parts.append("".join(current))
            current = []
            i += 1
            continue
        current.append(c)
        i += 1
    return -1, []


@dataclass(frozen=True)
class _Rule:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    anchored: bool
    base: str  # the folder of the .gitignore, relative to the root ("" for the root)


def _parse_rule(line: str, base: str) -> _Rule | None:
    line = line.rstrip("\r\n")
    # Trailing spaces are ignored unless escaped with a backslash.
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    if not line or line.startswith("#"):
        return None
    negate = False
    if line.startswith("!"):
        negate = True
        line = line[1:]
    elif line.startswith(("\\!", "\\#")):
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    # A slash at the start or in the middle ties the pattern to the file's folder.
    anchored = "/" in line
    line = line.lstrip("/")
    try:
        regex = re.compile(glob_to_regex(line))
    except re.error:
        return None  # git ignores patterns it cannot use; so do we
    return _Rule(regex, negate, dir_only, anchored, base.strip("/"))


class Gitignore:
    """An immutable, ordered set of .gitignore rules; ``with_*`` return extended copies."""

    __slots__ = ("_rules",)

    def __init__(self, rules: Iterable[_Rule] = ()) -> None:
        self._rules: tuple[_Rule, ...] = tuple(rules)

    def __bool__(self) -> bool:
        return bool(self._rules)

    def with_lines(self, lines: Iterable[str], base: str = "") -> Gitignore:
        """Return a matcher with these rules added, as if read from ``base``/.gitignore."""
        added = [rule for line in lines if (rule := _parse_rule(line, base)) is not None]
        if not added:
            return self
        return Gitignore((*self._rules, *added))

    def with_file(self, path: Path, base: str = "") -> Gitignore:
        """Return a matcher with the rules of the file at ``path`` (missing or unreadable: none)."""
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return self
        return self.with_lines(text.splitlines(), base)

    def match(self, rel_path: str, is_dir: bool) -> bool | None:
        """Whether the last rule matching this path ignores it (None: no rule matches).

        Only the path itself is tested, not its parent folders; walkers that do not
        descend into ignored folders need nothing more.
        """
        rel_path = rel_path.strip("/")
        name = rel_path.rsplit("/", 1)[-1]
        for rule in reversed(self._rules):
            if rule.dir_only and not is_dir:
                continue
            if rule.base:
                if not rel_path.startswith(rule.base + "/"):
                    continue
                sub = rel_path[len(rule.base) + 1 :]
            else:
                sub = rel_path
            if rule.regex.fullmatch(sub if rule.anchored else name):
                return not rule.negate
        return None

    def is_ignored(self, rel_path: str, is_dir: bool = False) -> bool:
        """Whether the path is ignored, itself or through an ignored parent folder.

        As in git, a file inside an ignored folder cannot be re-included.
        """
        parts = rel_path.strip("/").split("/")
        for k in range(1, len(parts)):
            if self.match("/".join(parts[:k]), True):
                return True
        return bool(self.match("/".join(parts), is_dir))
