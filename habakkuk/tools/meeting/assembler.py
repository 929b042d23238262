"""The Assembler: caption block updates in, finished transcript lines out (pure).

A platform shows captions as block elements, one per speaker's run of speech, whose text
grows as words arrive, whose last words are revised as recognition improves, and whose
start scrolls away as it gets long. The page's observer numbers each block and reports
its speaker and text whenever it changes, and when it is removed. The Assembler merges a
block's updates into one line, finishes the line when its block is removed, is reused
for another sentence, or has not changed for `quiet` seconds, and drops a finished line
that repeats or lies inside a recent line of the same speaker (a platform that redraws
its captions, or a resumed attendance seeing captions it already wrote). A finished line
carries the time its first words appeared.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from .record import Line

QUIET_SECONDS = 5.0
RECENT_LINES = 12  # per speaker, for dropping repeats
REVISED_WORDS = 3  # how many trailing words a revision may change
_WORD = re.compile(r"[\w']+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _norm(text: str) -> str:
    return " ".join(_words(text))


@dataclass
class _Open:
    speaker: str
    text: str
    first_at: float
    changed_at: float


def merged(old: str, new: str) -> str | None:
    """`new` as the continuation of `old` in the same block (grown, last words revised, or
    its start scrolled away), as the whole text; None when it is another sentence."""
    old_words, new_words = old.split(), new.split()
    if not old_words:
        return new
    o, n = _words(old), _words(new)
    if not n:
        return old
    # Grown, or the last few words revised: the new text keeps the old one's start.
    same = 0
    for a, b in zip(o, n, strict=False):
        if a != b:
            break
        same += 1
    if same == len(o) or (same >= 1 and same >= len(o) - REVISED_WORDS):
        return new
    # The start scrolled away: the new text starts inside the old one.
    for start in range(1, len(o)):
        tail = o[start:]
        keep = max(1, len(tail) - REVISED_WORDS)
        if len(n) >= keep and tail[:keep] == n[:keep]:
            return " ".join(old_words[: _index_of_word(old_words, start)] + new_words)
    return None


def _index_of_word(raw: list[str], count: int) -> int:
    """The index in `raw` (words split on spaces) after which `count` normalised words
    have passed."""
    seen = 0
    for index, token in enumerate(raw):
        if seen >= count:
            return index
        seen += len(_words(token))
    return len(raw)


class Assembler:
    """Turns caption block updates into finished lines (see the module's note)."""

    def __init__(self, quiet: float = QUIET_SECONDS) -> None:
        self.quiet = quiet
        self._open: dict[int, _Open] = {}
        self._recent: dict[str, deque[str]] = {}

    def seed(self, lines: list[Line]) -> None:
        """Remember lines already written (a resumed attendance's last lines), so the same
        captions still on screen are not written twice."""
        for line in lines:
            self._remember(line.speaker, _norm(line.text))

    def update(self, block: int, speaker: str, text: str, now: float) -> list[Line]:
        """Block `block` now shows `text` by `speaker`; the lines this finished."""
        text = " ".join(text.split())
        current = self._open.get(block)
        if current is None:
            if text:
                self._open[block] = _Open(speaker, text, now, now)
            return []
        if speaker and current.speaker and speaker != current.speaker:
            combined = None
        else:
            combined = merged(current.text, text)
        if combined is not None:
            current.speaker = current.speaker or speaker
            if combined != current.text:
                current.text = combined
                current.changed_at = now
            return []
        finished = self._finish(block)
        if text:
            self._open[block] = _Open(speaker, text, now, now)
        return finished

    def remove(self, block: int) -> list[Line]:
        """Block `block` left the page: its line is finished."""
        return self._finish(block)

    def tick(self, now: float) -> list[Line]:
        """Finish the lines that have not changed for `quiet` seconds."""
        finished: list[Line] = []
        for block in [b for b, o in self._open.items() if now - o.changed_at >= self.quiet]:
            finished.extend(self._finish(block))
        return finished

    def flush(self) -> list[Line]:
        """Finish every open line (the attendance is ending)."""
        finished: list[Line] = []
        for block in list(self._open):
            finished.extend(self._finish(block))
        return finished

    def _finish(self, block: int) -> list[Line]:
        current = self._open.pop(block, None)
        if current is None:
            return []
        text = self._new_part(current.speaker, current.text)
        if text is None:
            return []
        self._remember(current.speaker, _norm(current.text))
        return [Line(current.speaker, text, current.first_at)]

    def _new_part(self, speaker: str, text: str) -> str | None:
        """What of `text` is new against the speaker's recent lines: None when it repeats
        or lies inside one; only the rest when it continues one (a line finished by the
        quiet time whose block then went on)."""
        norm = _norm(text)
        if not norm:
            return None
        for seen in self._recent.get(speaker, ()):
            if norm == seen or f" {norm} " in f" {seen} ":
                return None
        for seen in self._recent.get(speaker, ()):
            if norm.startswith(seen + " "):
                skip = len(seen.split())
                raw = text.split()
                rest = " ".join(raw[_index_of_word(raw, skip) :])
                return rest or None
        return text

    def _remember(self, speaker: str, norm: str) -> None:
        if norm:
            self._recent.setdefault(speaker, deque(maxlen=RECENT_LINES)).append(norm)
