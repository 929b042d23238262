"""The snippet a search shows (memory's notes, sessions' messages): a few words around
the first match, in [brackets].

FTS5's own snippet() scores every match of a text against every other one: its cost
grows with the square of the matches (and worse), so one 21 MB note of common words
held the database thread for minutes, 4 KB of one repeated word takes 150 ms, and 20
session messages of 8,000 characters of one word took 180 ms. This one is linear and
bounded: it looks for the first match in the first SNIPPET_SCAN characters of a column
only (one regular-expression pass, in C), then tokenizes a few hundred characters
around it.

For memory (`stem=True`) a word matches as FTS5's porter stemmer would match it in most
cases: case and a few English endings ("gardens", "gardening", "running") are ignored.
Where the stemmer goes further ("hoping" for "hope"), no word is bracketed and the
caller shows the start of the note instead. Session messages are indexed without a
stemmer (`stem=False`): a word matches up to case and diacritics, as unicode61 reads it.
"""

from __future__ import annotations

import re
import unicodedata

SNIPPET_SCAN = 16_384  # characters of a column searched for the first match
SNIPPET_TOKENS = 16  # words shown, as snippet(..., 16) did
LOOK_BACK = 8 * 40  # characters before the match the fragment may start in
LOOK_AHEAD = SNIPPET_TOKENS * 40  # characters after it the fragment may end in
EDGE_CHARS = 40  # punctuation kept before the first word or after the last
WORD = re.compile(r"[^\W_]+")  # a token as unicode61 reads one: letters and digits
_VOWELS = frozenset("aeiou")
_KEEP_DOUBLE = frozenset("lsz")


def fold(word: str) -> str:
    """`word` without case or diacritics ("Café" -> "cafe")."""
    if word.isascii():
        return word.casefold()
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def light_stem(word: str) -> str:
    """`word` folded, with the first steps of the Porter stemmer and a final "e" dropped:
    "gardens", "gardening" and "garden" give "garden"; "running" and "runs" give "run";
    "parties" and "party" give "parti"; "hoping" and "hope" give "hop".

    What it keeps is a prefix of the folded word, but for a final "y" made "i" (which is
    why `Highlighter` looks for candidates without a final "i")."""
    stem = fold(word)
    if stem.endswith("sses") or (stem.endswith("ies") and len(stem) > 4):
        stem = stem[:-2]
    elif stem.endswith("s") and not stem.endswith("ss") and len(stem) > 3:
        stem = stem[:-1]
    for ending in ("ing", "ed"):
        base = stem[: -len(ending)]
        if stem.endswith(ending) and len(base) >= 3 and _VOWELS.intersection(base):
            stem = base
            if stem[-1] == stem[-2] and stem[-1] not in _KEEP_DOUBLE | _VOWELS:
                stem = stem[:-1]  # running -> run, stopped -> stop
            break
    if stem.endswith("y") and len(stem) > 2:
        stem = stem[:-1] + "i"
    if stem.endswith("e") and len(stem) > 2:
        stem = stem.rstrip("e") or stem
    return stem


class Highlighter:
    """The words of one query, and where they occur in a text."""

    def __init__(self, query: str, *, max_words: int = 64, stem: bool = True):
        words = WORD.findall(query)[:max_words]
        # What a token is compared by: its light stem, or (no stemmer) its folded self.
        self._key = light_stem if stem else fold
        self.stems = frozenset(self._key(w) for w in words)
        # A word's stem is a prefix of it, but for a final "y" made "i" ("party": "parti").
        prefixes = sorted(
            {s[:-1] if s.endswith("i") and len(s) > 2 else s for s in self.stems},
            key=len,
            reverse=True,
        )
        self._seen: dict[str, bool] = {}
        self._candidate = (
            re.compile(
                r"(?<![^\W_])(?:" + "|".join(re.escape(p) for p in prefixes) + r")[^\W_]*",
                re.IGNORECASE,
            )
            if prefixes
            else None
        )

    def is_hit(self, token: str) -> bool:
        """Whether `token` is one of the query's words (up to case and ending)."""
        found = self._seen.get(token)
        if found is None:
            found = self._key(token) in self.stems
            if len(self._seen) < 4096:
                self._seen[token] = found
        return found

    def first_hit(self, text: str, scan: int = SNIPPET_SCAN) -> int | None:
        """Where the first matching word starts in `text[:scan]`, or None."""
        if self._candidate is None:
            return None
        for found in self._candidate.finditer(text, 0, min(len(text), scan)):
            if self.is_hit(found.group()):
                return found.start()
        return None

    def snippet(
        self, text: str, *, scan: int = SNIPPET_SCAN, tokens: int = SNIPPET_TOKENS
    ) -> str | None:
        """Up to `tokens` words of `text` around its first match, matches in [brackets],
        "…" where the text goes on; None when nothing matches in its first `scan`
        characters.

        The work is bounded by `scan` whatever the size of `text`.
        """
        at = self.first_hit(text, scan)
        return None if at is None else fragment(text, at, self, tokens)


def opening(text: str, tokens: int = SNIPPET_TOKENS) -> str:
    """The first `tokens` words of `text`, "…" when it goes on (nothing matched)."""
    first = WORD.search(text, 0, min(len(text), SNIPPET_SCAN))
    return "" if first is None else fragment(text, first.start(), None, tokens)


def fragment(
    text: str, at: int, highlighter: Highlighter | None, tokens: int = SNIPPET_TOKENS
) -> str:
    """The `tokens` words (at most SNIPPET_TOKENS) around the word starting at `at`,
    chosen as FTS5's snippet() chooses them for one match: the whole text when it is that
    short; else from the start of the match's sentence when that is within reach, else
    with the match in the middle."""
    tokens = min(tokens, SNIPPET_TOKENS)  # LOOK_BACK and LOOK_AHEAD reach this far
    low = max(0, at - LOOK_BACK)
    high = min(len(text), at + LOOK_AHEAD)
    spans = [m.span() for m in WORD.finditer(text, low, high)]
    if low > 0 and spans and spans[0][0] == low and WORD.match(text, low - 1):
        spans.pop(0)  # a word cut by the window's start
    if high < len(text) and len(spans) > 1 and spans[-1][1] == high and WORD.match(text, high):
        spans.pop()  # a word cut by the window's end (the match itself always stays)
    index = next(i for i, span in enumerate(spans) if span[0] == at)
    starts = low == 0  # spans[0] is the text's first word
    ends = high == len(text)  # spans[-1] is its last
    first = max(0, index - tokens // 2)
    if ends:
        first = max(0, min(first, len(spans) - tokens))
    if not (starts and ends and len(spans) <= tokens):
        for i in range(index - 1, max(-1, index - tokens), -1):
            if (i == 0 and starts) or (i > 0 and _sentence_starts(text, spans[i - 1], spans[i])):
                first = i
                break
    last = min(len(spans), first + tokens) - 1
    start, end = spans[first][0], spans[last][1]
    # Where the text starts or ends within reach, its punctuation there is kept.
    opens = WORD.search(text, 0, start) is None and start <= EDGE_CHARS
    head = text[:start] if opens else "…"
    more = WORD.search(text, end, min(len(text), end + SNIPPET_SCAN))
    closes = more is None and len(text) - end <= EDGE_CHARS
    tail = text[end:].rstrip() if closes else "…"
    out = [head]
    for i in range(first, last + 1):
        if i > first:
            out.append(text[spans[i - 1][1] : spans[i][0]])
        word = text[spans[i][0] : spans[i][1]]
        out.append(f"[{word}]" if highlighter is not None and highlighter.is_hit(word) else word)
    out.append(tail)
    return "".join(out)


def _sentence_starts(text: str, before: tuple[int, int], word: tuple[int, int]) -> bool:
    """Whether `word` (a span) starts a sentence, as FTS5 reads it: the gap after the word
    `before` it ends in white space after a "." or ":"."""
    gap = text[before[1] : word[0]]
    stripped = gap.rstrip()
    return len(stripped) < len(gap) and stripped.endswith((".", ":"))
