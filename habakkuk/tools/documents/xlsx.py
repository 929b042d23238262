"""XLSX: every sheet (or the one asked for) as tab-separated rows under "--- sheet NAME ---".

Cells are placed by their reference (a row whose cells skip columns keeps its tabs);
text comes from the shared strings or the cell's inline string, numbers and formula
results as Excel stored them, except that a number whose style shows a date or a time
is written as one (ISO 8601: 2026-03-01, 14:30:00; see xlsx_dates). A sheet is
streamed (ooxml.stream): a 50,000-row sheet, or a row of a million cells, is never
one tree.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from xml.etree.ElementTree import Element

from .errors import DocumentError
from .ooxml import Package, local, parse, stream
from .output import Full, Sink
from .xlsx_dates import DateStyles, date_styles


def read_xlsx(package: Package, main: str, sink: Sink, sheet: str | None) -> str:
    """Add the sheets' rows to `sink` until it is full; returns the summary
    ("XLSX, sheets: A, B")."""
    sheets, epoch_1904 = _sheets(package, main)
    names = ", ".join(name for name, _ in sheets) or "none"
    chosen = sheets if sheet is None else [_choose(sheets, sheet, package.name)]
    book: _Book | None = None
    with contextlib.suppress(Full):  # the sink is full: the note says where it was cut
        for name, part in chosen:
            if book is None:
                dates = date_styles(package, main, epoch_1904)
                book = _Book(_shared_strings(package, main), dates)
            sink.where = f"sheet {name!r}"
            sink.add(f"--- sheet {name} ---\n")
            _rows(package, part, book, name, sink)
    return f"XLSX, sheets: {names}"


@dataclass(frozen=True)
class _Book:
    """What every sheet's cells refer to: the shared strings and the date styles."""

    strings: list[str]
    dates: DateStyles


def _sheets(package: Package, main: str) -> tuple[list[tuple[str, str]], bool]:
    """(name, part) of each sheet, in the workbook's order (chartsheets have no rows),
    and whether its dates count from 1904 (old Mac workbooks) rather than 1900."""
    targets = {rel.id: rel.target for rel in package.relationships(main) if rel.type == "worksheet"}
    found: list[tuple[str, str]] = []
    epoch_1904 = False
    for elem in parse(package, main):
        if local(elem.tag) == "workbookPr":
            epoch_1904 = elem.get("date1904") in ("1", "true")
        elif local(elem.tag) == "sheet":
            rel_id = next((v for k, v in elem.attrib.items() if local(k) == "id"), "")
            if rel_id in targets and package.has(targets[rel_id]):
                hidden = " (hidden)" if elem.get("state") in ("hidden", "veryHidden") else ""
                found.append((f"{elem.get('name') or rel_id}{hidden}", targets[rel_id]))
    return found, epoch_1904


def _choose(sheets: list[tuple[str, str]], wanted: str, name: str) -> tuple[str, str]:
    """The sheet named `wanted` (case-insensitively, "(hidden)" aside) or numbered it."""
    for sheet_name, part in sheets:
        if wanted.casefold() in (sheet_name.casefold(), _plain(sheet_name).casefold()):
            return sheet_name, part
    if wanted.isdigit() and 1 <= int(wanted) <= len(sheets):
        return sheets[int(wanted) - 1]
    listed = ", ".join(repr(n) for n, _ in sheets) or "none"
    raise DocumentError(f"{name} has no sheet {wanted!r}; its sheets: {listed}")


def _plain(sheet_name: str) -> str:
    return sheet_name.removesuffix(" (hidden)")


def _shared_strings(package: Package, main: str) -> list[str]:
    """The workbook's shared strings, in order (phonetic runs left out)."""
    strings: list[str] = []
    for part in package.related(main, "sharedStrings"):
        text = _StringText()
        for started, elem in stream(package, part):
            name = local(elem.tag)
            if text.event(started, name, elem) and name == "si":
                strings.append(text.take())
    return strings


class _StringText:
    """The text of a shared or inline string from its events: its t elements, those of
    its rich-text runs included, phonetic runs (rPh) left out."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.phonetic = 0

    def event(self, started: bool, name: str, elem: Element) -> bool:
        """Take one event; returns whether it was an end (the caller's cue)."""
        if name == "rPh":
            self.phonetic += 1 if started else -1
        elif name == "t" and not started and not self.phonetic:
            self.parts.append(elem.text or "")
        return not started

    def take(self) -> str:
        """The text so far, and start afresh."""
        text = "".join(self.parts)
        self.parts = []
        return text


def _rows(package: Package, part: str, book: _Book, sheet: str, sink: Sink) -> None:
    """Stream one sheet's rows into `sink`, one tab-separated line each, every cell in its
    column (a row whose cells skip columns keeps its tabs)."""
    tags: _Tags | None = None
    columns: dict[str, int] = {}  # column letters -> index, parsed once each
    values: list[str] = []  # the open row's cells
    row_number = ""
    kind: str | None = None  # the open cell's type, style and stored value
    style: str | None = None
    raw = ""
    dates = book.dates if book.dates else None
    inline = _StringText()
    try:
        for started, elem in stream(package, part):
            tag = elem.tag
            if tags is None:
                tags = _Tags(tag)
            if started:
                if tag == tags.cell:
                    kind, raw = elem.get("t"), ""
                    style = elem.get("s") if dates is not None else None
                    ref = elem.get("r")
                    if ref:
                        letters = ref.rstrip("0123456789")
                        column = columns.get(letters)
                        if column is None:
                            column = columns[letters] = _column(letters)
                        if column > len(values):
                            values.extend([""] * (column - len(values)))
                elif tag == tags.row:
                    values = []
                    row_number = elem.get("r") or row_number
                elif kind == "inlineStr":
                    inline.event(True, local(tag), elem)
            elif tag == tags.value:
                raw = elem.text or ""
            elif tag == tags.cell:
                if kind == "inlineStr":
                    text = inline.take()
                elif style is not None and dates is not None and (kind is None or kind == "n"):
                    text = dates.text(style, raw) or _value(kind, raw, book.strings)
                else:
                    text = _value(kind, raw, book.strings)
                if "\t" in text or "\n" in text:
                    text = " ".join(text.split())  # a cell stays one field of its line
                values.append(text)
                kind = None
            elif tag == tags.row:
                line = "\t".join(values).rstrip("\t")
                if line:
                    sink.add(line + "\n")
            elif kind == "inlineStr":
                inline.event(False, local(tag), elem)
    except Full:
        sink.cut_at = f"sheet {sheet!r}, row {row_number}" if row_number else sink.cut_at
        raise


class _Tags:
    """The tags of a sheet's elements in its namespace (transitional or strict OOXML)."""

    def __init__(self, root: str) -> None:
        ns = root[: root.index("}") + 1] if root.startswith("{") else ""
        self.row = f"{ns}row"
        self.cell = f"{ns}c"
        self.value = f"{ns}v"


def _value(kind: str | None, raw: str, strings: list[str]) -> str:
    """A cell's text from its type and stored value."""
    if kind == "s":
        try:
            return strings[int(raw)]
        except (ValueError, IndexError):
            return ""
    if kind == "b":
        return "TRUE" if raw == "1" else "FALSE" if raw == "0" else raw
    if kind is None or kind == "n":
        return _number(raw)
    return raw  # str (a formula's text), e (an error such as #DIV/0!), d (an ISO date)


def _number(raw: str) -> str:
    """A stored number, shortened where Excel kept binary noise (0.1 as 0.10000000000000001)."""
    if len(raw) <= 15:
        return raw
    try:
        return repr(float(raw))
    except ValueError:
        return raw


def _column(letters: str) -> int:
    """The 0-based index of column `letters` ("A" -> 0, "AA" -> 26)."""
    index = 0
    for letter in letters.upper():
        if not "A" <= letter <= "Z":
            break
        index = index * 26 + ord(letter) - 64
    return max(index - 1, 0)
