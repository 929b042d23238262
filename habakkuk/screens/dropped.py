"""Files dropped on the terminal: a terminal pastes a dropped file as its path, quoted
('/a b.pdf' or "/a b.pdf"), with backslash-escaped spaces (/a\\ b.pdf) or as a file://
URL, several separated by spaces. `split_dropped` finds the paths in a message that name
existing files; the rest of the text is the message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

QUOTES = "'\""


@dataclass(frozen=True)
class Dropped:
    """A message split into the files it names and the rest of its text."""

    paths: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class _Word:
    value: str  # the word with its quotes and escapes undone
    start: int
    end: int


def _words(text: str) -> Iterator[_Word]:
    """The whitespace-separated words of `text`, as a shell reads them: a quote opening a
    word runs to its match (no escapes in '...', \\" and \\\\ in "..."); elsewhere a
    backslash escapes the next character. A quote inside a word (it's) is a letter."""
    index, length = 0, len(text)
    while index < length:
        if text[index].isspace():
            index += 1
            continue
        start = index
        value: list[str] = []
        while index < length and not text[index].isspace():
            char = text[index]
            if char in QUOTES and index == start:
                close = text.find(char, index + 1)
                while char == '"' and close > 0 and text[close - 1] == "\\":
                    close = text.find(char, close + 1)
                if close < 0:  # unbalanced: the rest of the word as it is
                    close = length
                inner = text[index + 1 : close]
                if char == '"':
                    inner = inner.replace('\\"', '"').replace("\\\\", "\\")
                value.append(inner)
                index = close + 1
            elif char == "\\" and index + 1 < length:
                value.append(text[index + 1])
                index += 2
            else:
                value.append(char)
                index += 1
        yield _Word("".join(value), start, min(index, length))


def _as_path(word: str) -> str | None:
    """The local path a word names (absolute, ~/..., or a file:// URL), else None."""
    if word.startswith("file://"):
        url = urlparse(word)
        if url.netloc not in ("", "localhost"):
            return None
        return unquote(url.path) or None
    if word.startswith("~"):
        return str(Path(word).expanduser())
    if word.startswith("/"):
        return word
    return None


def split_dropped(text: str, is_file: Callable[[str], bool]) -> Dropped:
    """The paths in `text` for which `is_file` holds, and the text without them.

    Only words that look like local paths (absolute, ~/..., file://) are tried; one that
    names no file stays in the text as the user wrote it.
    """
    paths: list[str] = []
    kept: list[str] = []
    last = 0
    for word in _words(text):
        path = _as_path(word.value)
        if path is None or not is_file(path):
            continue
        paths.append(path)
        kept.append(text[last : word.start])
        last = word.end
    if not paths:
        return Dropped((), text)
    kept.append(text[last:])
    return Dropped(tuple(paths), "".join(kept).strip())


def regular_file(path: str) -> bool:
    """Whether `path` is an existing regular file (not a directory or a device)."""
    try:
        return Path(path).is_file()
    except OSError:
        return False
