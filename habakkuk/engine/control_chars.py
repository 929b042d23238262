"""Characters that have no place in stored text: one check for memory notes and board cards.

A NUL written into a Markdown note, an escape sequence that repaints a terminal, or a
bidirectional override that shows "exe.txt" for "txt.exe" all came in through writes
that took any text. Refused: the C0 controls but tab, line feed and carriage return;
DEL and the C1 controls (U+0080-U+009F, which terminals read as escapes); the
bidirectional embeddings and overrides (U+202A-U+202E) and isolates (U+2066-U+2069).
The marks that right-to-left text needs (U+200E, U+200F, U+061C) are allowed.

Where the text is a person's own words typed into a chat (/remember), the caller strips
them instead (`without_controls`); everywhere else a write is refused with the character
and where it is (`refuse_controls`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from .errors import BadInput

CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# The C0 controls have no Unicode names: their usual abbreviations.
_C0_NAMES = (
    "NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL",
    "BS", "HT", "LF", "VT", "FF", "CR", "SO", "SI",
    "DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB",
    "CAN", "EM", "SUB", "ESC", "FS", "GS", "RS", "US",
)  # fmt: skip


@dataclass(frozen=True)
class ControlChar:
    """A refused character in a text: which, and where (1-based line and column)."""

    char: str
    index: int
    line: int
    column: int

    @property
    def name(self) -> str:
        """ "U+0000 (NUL)", "U+202E (RIGHT-TO-LEFT OVERRIDE)"."""
        code = ord(self.char)
        if code < 0x20:
            label = _C0_NAMES[code]
        elif code == 0x7F:
            label = "DEL"
        else:
            label = unicodedata.name(self.char, "C1 control")
        return f"U+{code:04X} ({label})"


def find_control(text: str) -> ControlChar | None:
    """The first refused character of `text`, or None."""
    found = CONTROLS.search(text)
    if found is None:
        return None
    index = found.start()
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return ControlChar(found.group(), index, line, column)


def refuse_controls(text: str, what: str) -> None:
    """BadInput naming the first refused character of `text` and where it is.

    `what` starts the message: "memory: the content", "board: title".
    """
    found = find_control(text)
    if found is None:
        return
    where = (
        f"line {found.line}, column {found.column}"
        if "\n" in text
        else (f"position {found.column}")
    )
    raise BadInput(
        f"{what} has the control character {found.name} at {where}; remove it "
        "(tab and line breaks are allowed, other control characters and bidirectional "
        "overrides are not)"
    )


def without_controls(text: str) -> str:
    """`text` with every refused character taken out (a person's own words)."""
    return CONTROLS.sub("", text)
