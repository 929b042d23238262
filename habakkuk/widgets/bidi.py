"""Right-to-left text (Arabic, Hebrew) in the terminal: each drawn line in visual order,
Arabic letters in their joined forms.

A terminal draws cells left to right as it is given them, and Textual lays text out in
logical order, so without this an Arabic reply reads backwards. Most terminals do not
reorder (xterm, Windows Terminal, kitty, Alacritty; WezTerm only when asked) nor join
Arabic letters, so the line is put in visual order here, after wrapping (a wrapped
paragraph's lines stay in reading order, top to bottom), and Arabic letters are given
their presentation forms (U+FB50..U+FEFF), which every terminal draws joined. A terminal
that reorders itself (VTE in its implicit mode, Konsole, mlterm) may reorder again: that
is its setting to turn off.

The reordering is the Unicode Bidi Algorithm for one line with no explicit embeddings
(rules P2-P3, W1-W7, N1-N2, I1-I2, L1-L2, L4 for paired brackets), written here rather
than taking a dependency: explicit embedding controls are rare in model replies, and a
line with no right-to-left letter is returned untouched, at the cost of one search.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache, lru_cache
from typing import TYPE_CHECKING, TextIO

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

if TYPE_CHECKING:
    from textual.widgets.markdown import MarkdownBlock

# ECMA-48's BDSM as the terminal working group's BiDi recommendation uses it: "implicit"
# (the terminal reorders each line itself, the default) and "explicit" (it draws cells as
# given, for an application that reorders).
IMPLICIT_MODE = "\x1b[8h"
EXPLICIT_MODE = "\x1b[8l"
# Letters of the right-to-left scripts (Hebrew, Arabic, Syriac, Thaana, NKo, Samaritan,
# Mandaic, Arabic presentation forms, and the supplementary right-to-left blocks).
_RTL = re.compile(
    "[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc\U00010800-\U00010fff\U0001e800-\U0001efff]"
)
_STRONG_RIGHT = frozenset(("R", "AL"))
_NUMBER = frozenset(("EN", "AN"))
_NEUTRAL = frozenset(("B", "S", "WS", "ON", "BN"))
_TRAILING = frozenset(("WS", "S", "B", "BN"))
_MIRROR = dict(zip("()[]{}<>«»‹›", ")(][}{><»«›‹", strict=True))
_OPENING = {"(": ")", "[": "]", "{": "}", "«": "»"}
_TATWEEL = "\u0640"
# Lam followed by an alef: one ligature glyph (isolated, final) in Arabic writing.
_LAM = "\u0644"
_LAM_ALEF = {
    "\u0622": ("\ufef5", "\ufef6"),
    "\u0623": ("\ufef7", "\ufef8"),
    "\u0625": ("\ufef9", "\ufefa"),
    "\u0627": ("\ufefb", "\ufefc"),
}


def has_rtl(text: str) -> bool:
    """`text` has a right-to-left letter (what needs reordering at all)."""
    return _RTL.search(text) is not None


@cache
def _forms() -> dict[str, dict[str, str]]:
    """Each Arabic letter's presentation forms by name (isolated, final, initial, medial),
    read from the Unicode database's compatibility decompositions."""
    forms: dict[str, dict[str, str]] = {}
    for code in (*range(0xFB50, 0xFE00), *range(0xFE70, 0xFF00)):
        parts = unicodedata.decomposition(chr(code)).split()
        if len(parts) == 2 and parts[0] in ("<isolated>", "<final>", "<initial>", "<medial>"):
            forms.setdefault(chr(int(parts[1], 16)), {}).setdefault(parts[0][1:-1], chr(code))
    return forms


def _transparent(char: str) -> bool:
    return unicodedata.category(char) in ("Mn", "Me", "Cf")


def shape(text: str) -> str:
    """Arabic letters in `text` in their joined presentation forms (logical order kept);
    a lam-alef pair becomes one ligature and the line ends with one more space."""
    return "".join(char for char, _ in _shape([(char, i) for i, char in enumerate(text)]))


# A character and the index, in the line as given, of the one whose style it takes.
Cell = tuple[str, int]


def _shape(cells: list[Cell]) -> list[Cell]:
    forms = _forms()
    chars = [char for char, _ in cells]
    if not any(char in forms for char in chars):
        return cells
    out: list[Cell] = []
    i = 0
    while i < len(chars):
        char, style = cells[i]
        mine = forms.get(char)
        if mine is None:
            out.append(cells[i])
            i += 1
            continue
        before = _neighbour(chars, i, -1)
        after_at = _neighbour_index(chars, i, 1)
        after = chars[after_at] if after_at is not None else ""
        joins_before = before == _TATWEEL or "initial" in forms.get(before, {})
        if char == _LAM and after in _LAM_ALEF and after_at == i + 1:
            isolated, final = _LAM_ALEF[after]
            out.append((final if joins_before else isolated, style))
            i += 2
            continue
        joins_after = "initial" in mine and (after == _TATWEEL or after in forms)
        if joins_before and joins_after and "medial" in mine:
            form = "medial"
        elif joins_before and "final" in mine:
            form = "final"
        elif joins_after:
            form = "initial"
        else:
            form = "isolated"
        out.append((mine.get(form, char), style))
        i += 1
    # A ligature took two letters' cells' worth of text into one: the line keeps its width.
    out += [(" ", cells[-1][1])] * (len(cells) - len(out))
    return out


def _neighbour_index(chars: list[str], at: int, step: int) -> int | None:
    i = at + step
    while 0 <= i < len(chars) and _transparent(chars[i]):
        i += step
    return i if 0 <= i < len(chars) else None


def _neighbour(chars: list[str], at: int, step: int) -> str:
    i = _neighbour_index(chars, at, step)
    return chars[i] if i is not None else ""


def bidi_levels(text: str) -> list[int]:
    """The embedding level of each character of one line (even: left to right)."""
    types = [unicodedata.bidirectional(char) or "L" for char in text]
    # Explicit embeddings, overrides and isolates are not followed: they count as neutral.
    types = ["ON" if kind in ("LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI")
             else kind for kind in types]  # fmt: skip
    base = 0
    for kind in types:  # P2, P3: the first strong letter sets the line's direction
        if kind == "L":
            break
        if kind in _STRONG_RIGHT:
            base = 1
            break
    sos = "R" if base else "L"
    previous = sos
    for i, kind in enumerate(types):  # W1: a mark takes its base's type
        if kind == "NSM":
            types[i] = previous if previous not in ("B", "S", "WS", "ON") else "ON"
        previous = types[i]
    strong = sos
    for i, kind in enumerate(types):  # W2, W3
        if kind == "EN" and strong == "AL":
            types[i] = "AN"
        if kind in ("L", "R", "AL"):
            strong = kind
        if kind == "AL":
            types[i] = "R"
    for i in range(1, len(types) - 1):  # W4
        left, mid, right = types[i - 1], types[i], types[i + 1]
        if left == right == "EN" and mid in ("ES", "CS"):
            types[i] = "EN"
        elif left == right == "AN" and mid == "CS":
            types[i] = "AN"
    for i, kind in enumerate(types):  # W5: European terminators beside a number
        if kind == "EN":
            j = i - 1
            while j >= 0 and types[j] == "ET":
                types[j] = "EN"
                j -= 1
            j = i + 1
            while j < len(types) and types[j] == "ET":
                types[j] = "EN"
                j += 1
    types = ["ON" if kind in ("ES", "ET", "CS") else kind for kind in types]  # W6
    strong = sos
    for i, kind in enumerate(types):  # W7
        if kind == "EN" and strong == "L":
            types[i] = "L"
        if kind in ("L", "R"):
            strong = kind
    _brackets(text, types, sos)
    resolved = _neutrals(types, sos)
    levels = []
    for kind in resolved:  # I1, I2
        if base == 0:
            levels.append({"R": 1, "AN": 2, "EN": 2}.get(kind, 0))
        else:
            levels.append({"L": 2, "AN": 2, "EN": 2}.get(kind, 1))
    original = [unicodedata.bidirectional(char) for char in text]
    i = len(levels) - 1
    while i >= 0 and original[i] in _TRAILING:  # L1: trailing white space
        levels[i] = base
        i -= 1
    for i, kind in enumerate(original):
        if kind in ("S", "B"):
            levels[i] = base
    return levels


def _brackets(text: str, types: list[str], sos: str) -> None:
    """N0: a pair of brackets takes the line's direction when its content has a letter of
    that direction, else the content's when the text before the pair is of it too."""
    stack: list[tuple[str, int]] = []
    pairs: list[tuple[int, int]] = []
    for i, char in enumerate(text):
        if types[i] != "ON":
            continue
        if char in _OPENING:
            stack.append((_OPENING[char], i))
        elif stack and char == stack[-1][0]:
            pairs.append((stack.pop()[1], i))
    for opening, closing in sorted(pairs):
        inside = {_direction(kind) for kind in types[opening + 1 : closing] if kind not in _NEUTRAL}
        if not inside:
            continue
        if sos in inside:
            fill = sos
        else:
            before = next(
                (_direction(kind) for kind in reversed(types[:opening]) if kind not in _NEUTRAL),
                sos,
            )
            fill = before if before in inside else sos
        types[opening] = types[closing] = fill


def _neutrals(types: list[str], sos: str) -> list[str]:
    """N1, N2: a run of neutrals between two of one direction takes it (numbers count as
    right to left), else the line's direction."""
    resolved = list(types)
    i = 0
    while i < len(types):
        if types[i] not in _NEUTRAL:
            i += 1
            continue
        j = i
        while j < len(types) and types[j] in _NEUTRAL:
            j += 1
        before = sos if i == 0 else _direction(types[i - 1])
        after = sos if j == len(types) else _direction(types[j])
        fill = before if before == after else sos
        for k in range(i, j):
            resolved[k] = fill
        i = j
    return resolved


def _direction(kind: str) -> str:
    return "R" if kind in ("R", "EN", "AN") else "L"


def visual_order(levels: list[int]) -> list[int]:
    """L2: the logical indexes in the order they are drawn, left to right."""
    order = list(range(len(levels)))
    if not levels:
        return order
    highest = max(levels)
    lowest_odd = min((level for level in levels if level % 2), default=highest + 1)
    for level in range(highest, lowest_odd - 1, -1):
        i = 0
        while i < len(order):
            if levels[order[i]] >= level:
                j = i
                while j < len(order) and levels[order[j]] >= level:
                    j += 1
                order[i:j] = reversed(order[i:j])
                i = j
            else:
                i += 1
    return order


def visual_text(text: str) -> str:
    """One line of `text` as drawn: shaped, in visual order (for tests and plain text)."""
    return _layout(text)[0]


@lru_cache(maxsize=4096)
def _layout(text: str) -> tuple[str, tuple[int, ...]]:
    """One line as drawn, and for each drawn character the index in `text` of the one
    whose style it takes: shaped, then reordered, a combining mark kept after the letter
    it sits on (the terminal draws it over the cell before it). Cached: a line is drawn
    again and again (scrolling, a streamed reply's tail) with the same text."""
    cells = _shape([(char, i) for i, char in enumerate(text)])
    shaped = "".join(char for char, _ in cells)
    levels = bidi_levels(shaped)
    # Clusters: a letter and the marks after it move together.
    clusters: list[list[int]] = []
    for i, (char, _) in enumerate(cells):
        if clusters and _transparent(char):
            clusters[-1].append(i)
        else:
            clusters.append([i])
    order = visual_order([levels[cluster[0]] for cluster in clusters])
    chars: list[str] = []
    sources: list[int] = []
    for index in order:
        for i in clusters[index]:
            char, source = cells[i]
            chars.append(_MIRROR.get(char, char) if levels[i] % 2 else char)
            sources.append(source)
    return "".join(chars), tuple(sources)


def visual_strip(strip: Strip, width: int = 0) -> Strip:
    """A drawn line in visual order; the same strip when it has no right-to-left letter.
    `width`: the cells the line may take; a right-to-left line ends at its right edge."""
    if not has_rtl(strip.text):
        return strip
    segments = tuple(strip)
    if any(segment.control for segment in segments):
        return strip
    return _visual_segments(segments, strip.cell_length, width)


@lru_cache(maxsize=2048)
def _visual_segments(segments: tuple[Segment, ...], cells: int, width: int) -> Strip:
    """The work of `visual_strip`, cached by the line's segments: Textual draws a line
    again (scrolling, a streamed reply's tail) far more often than it changes."""
    strip = Strip(segments, cells)
    if width > cells:
        last = next((segment.style for segment in reversed(segments) if segment.style), None)
        strip = strip.extend_cell_length(width, last or Style.null())
    styles = [segment.style or Style.null() for segment in strip for _ in segment.text]
    drawn, sources = _layout(strip.text)
    out: list[Segment] = []
    for char, source in zip(drawn, sources, strict=True):
        style = styles[source]
        if out and out[-1].style == style:
            out[-1] = Segment(out[-1].text + char, style)
        else:
            out.append(Segment(char, style))
    return Strip(out, strip.cell_length)


@cache
def visual_block(block: type[MarkdownBlock]) -> type[MarkdownBlock]:
    """`block`'s class drawing its lines in visual order (same name and CSS)."""

    def render_line(self: MarkdownBlock, y: int) -> Strip:
        return visual_strip(block.render_line(self, y), self.content_size.width)

    return type(block.__name__, (block,), {"render_line": render_line})


@contextmanager
def terminal_reorders(stream: TextIO | None, reorders: bool) -> Iterator[None]:
    """Inside the block, the terminal on `stream` reorders right-to-left text itself or
    not (a terminal without BiDi support ignores the sequence); after it, its default
    (implicit mode). Nothing is written when `stream` is not a terminal."""
    on_terminal = stream is not None and stream.isatty()
    if on_terminal and stream is not None:
        stream.write(IMPLICIT_MODE if reorders else EXPLICIT_MODE)
        stream.flush()
    try:
        yield
    finally:
        if on_terminal and stream is not None:
            stream.write(IMPLICIT_MODE)
            stream.flush()
