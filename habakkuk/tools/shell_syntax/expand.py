"""Word expansions a shell applies before running a command, as far as text shows them.

* :func:`brace_expand`: bash brace expansion, ``/{etc,usr}`` -> ``/etc /usr``,
  ``{1..3}``, ``{a..e..2}``, nested and empty alternatives; only unquoted braces
  expand, ``${...}`` never does.
* :func:`expand_words`: brace expansion of every word, then the field
  splitting that an unquoted ``$IFS``/``${IFS}`` causes (``rm${IFS}-rf``), so
  a list of words becomes the argv a shell would build.

Variables, globs and command substitutions are not evaluated: their text is
kept as it is.
"""

from __future__ import annotations

import itertools
import re

from habakkuk.tools.shell_syntax.lexer import EXPANSION, LITERAL, PartKind, Word

__all__ = ["MAX_EXPANSIONS", "brace_expand", "expand_words"]

# Cap on the words one word expands into ({1..100000} stays cheap); beyond it the rest is
# dropped, which only matters for input built to be enormous.
MAX_EXPANSIONS = 512
# Characters examined while expanding one word; past it the words found so far are kept.
_WORK_BUDGET = 500_000

# A character with whether brace expansion may act on it (unquoted literal text).
_Chars = list[tuple[str, bool]]
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
_SEQUENCE = re.compile(r"(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?")


def _chars(parts: list[tuple[str, PartKind]]) -> _Chars:
    return [(ch, kind == LITERAL) for text, kind in parts for ch in text]


def _brace_pairs(chars: _Chars) -> dict[int, tuple[int, list[int]]]:
    """For each active '{' that is closed: the closing index and its top-level commas (O(n))."""
    pairs: dict[int, tuple[int, list[int]]] = {}
    stack: list[tuple[int, list[int]]] = []
    for k, (ch, active) in enumerate(chars):
        if not active:
            continue
        if ch == "{" and not (k > 0 and chars[k - 1] == ("$", True)):
            stack.append((k, []))
        elif ch == "}" and stack:
            opened, commas = stack.pop()
            pairs[opened] = (k, commas)
        elif ch == "," and stack:
            stack[-1][1].append(k)
    return pairs


def _sequence(body: str) -> list[str] | None:
    """The items of a {x..y[..step]} sequence, or None when body is not one."""
    m = _SEQUENCE.fullmatch(body)
    if m is None:
        return None
    first, last, step_text = m.groups()
    step = abs(int(step_text)) if step_text else 1
    step = step or 1
    if first.lstrip("-").isdigit() and last.lstrip("-").isdigit():
        a, b = int(first), int(last)
        width = (
            max(len(first), len(last))
            if first.lstrip("-").startswith("0") or last.lstrip("-").startswith("0")
            else 0
        )
        numbers = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [str(v).zfill(width) for v in numbers[:MAX_EXPANSIONS]]
    if len(first) == 1 and len(last) == 1 and not first.isdigit() and not last.isdigit():
        a, b = ord(first), ord(last)
        codes = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [chr(v) for v in codes[:MAX_EXPANSIONS]]
    return None


def _expand_first(chars: _Chars, limit: int) -> list[_Chars] | None:
    """The words made by expanding the leftmost brace expression, or None if there is none."""
    pairs = _brace_pairs(chars)
    for start in sorted(pairs):
        close, commas = pairs[start]
        if commas:
            bounds = [start, *commas, close]
            alternatives = [chars[a + 1 : b] for a, b in itertools.pairwise(bounds)]
        else:
            items = _sequence("".join(c for c, _ in chars[start + 1 : close]))
            if items is None:
                continue  # {x} or {} stays as it is; look further right
            alternatives = [[(c, False) for c in item] for item in items]
        prefix, suffix = chars[:start], chars[close + 1 :]
        # Alternatives may hold braces themselves: they are expanded with the suffix later.
        return [prefix + alt + suffix for alt in alternatives[:limit]]
    return None


def _expand(chars: _Chars, limit: int) -> list[_Chars]:
    """Depth-first, so the first words come out first; bounded in results and in work."""
    out: list[_Chars] = []
    stack = [chars]
    budget = _WORK_BUDGET
    while stack and len(out) < limit:
        item = stack.pop()
        budget -= len(item)
        if budget < 0:
            break  # built to be enormous: keep what was found
        expanded = _expand_first(item, limit)
        if expanded is None:
            out.append(item)
        else:
            stack.extend(reversed(expanded))
    return out or [chars]


def brace_expand(word: Word) -> list[str]:
    """The words bash brace expansion makes of ``word`` (quote removal done)."""
    if not any(kind == LITERAL and "{" in text for text, kind in word.parts):
        return [word.value]
    return ["".join(c for c, _ in chars) for chars in _expand(_chars(word.parts), MAX_EXPANSIONS)]


def _ifs_split(word: Word) -> list[Word]:
    """Split a word at unquoted $IFS / ${IFS}, which a shell turns into field breaks."""
    if not any(kind == EXPANSION and text in ("$IFS", "${IFS}") for text, kind in word.parts):
        return [word]
    fields: list[list[tuple[str, PartKind]]] = [[]]
    for text, kind in word.parts:
        if kind == EXPANSION and text in ("$IFS", "${IFS}"):
            fields.append([])
        else:
            fields[-1].append((text, kind))
    return [
        Word("".join(t for t, _ in f), word.subs, word.procs, word.quoted, f) for f in fields if f
    ]


def _is_literal_assignment(word: Word) -> bool:
    text, kind = word.parts[0]
    return kind == LITERAL and _ASSIGNMENT.match(text) is not None


def expand_words(words: list[Word]) -> list[Word]:
    """The argv a shell builds from ``words``: brace expansion, then $IFS field splitting.

    Substitution bodies stay attached to every word made from the word that held them.
    """
    out: list[Word] = []
    prefix = True
    for word in words:
        # Assignments before the command (A={x,y} cmd) are not brace-expanded, as in bash.
        prefix = prefix and bool(word.parts) and _is_literal_assignment(word)
        if prefix:
            out.append(word)
            continue
        for piece in _ifs_split(word):
            values = brace_expand(piece)
            if len(values) == 1 and values[0] == piece.value:
                out.append(piece)
                continue
            out.extend(Word(v, piece.subs, piece.procs, piece.quoted) for v in values)
            if len(out) >= MAX_EXPANSIONS:
                return out
    return out
