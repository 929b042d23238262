"""XLSX: every sheet (or the one asked for) as tab-separated rows under "--- sheet NAME ---".

Cells are placed by their reference (a row whose cells skip columns keeps its tabs);
text comes from the shared strings or the cell's inline string, numbers and formula
results as Excel stored them (a date is the serial number Excel keeps). A sheet is
streamed: each row is cleared once read, so a 50,000-row sheet is never one tree.
"""

from __future__ import annotations

import contextlib
from xml.etree.ElementTree import Element

from .errors import DocumentError
from .ooxml import Package, local, parse, parse_batches, parse_events
from .output import Full, Sink


def read_xlsx(package: Package, main: str, sink: Sink, sheet: str | None) -> str:
    """Add the sheets' rows to `sink` until it is full; returns the summary
    ("XLSX, sheets: A, B")."""
    sheets = _sheets(package, main)
    names = ", ".join(name for name, _ in sheets) or "none"
    chosen = sheets if sheet is None else [_choose(sheets, sheet, package.name)]
    strings: list[str] | None = None
    with contextlib.suppress(Full):  # the sink is full: the note says where it was cut
        for name, part in chosen:
            if strings is None:
                strings = _shared_strings(package, main)
            sink.where = f"sheet {name!r}"
            sink.add(f"--- sheet {name} ---\n")
            _rows(package, part, strings, sink, name)
    return f"XLSX, sheets: {names}"


def _sheets(package: Package, main: str) -> list[tuple[str, str]]:
    """(name, part) of each sheet, in the workbook's order (chartsheets have no rows)."""
    targets = {rel.id: rel.target for rel in package.relationships(main) if rel.type == "worksheet"}
    found: list[tuple[str, str]] = []
    for elem in parse(package, main):
        if local(elem.tag) == "sheet":
            rel_id = next((v for k, v in elem.attrib.items() if local(k) == "id"), "")
            if rel_id in targets and package.has(targets[rel_id]):
                hidden = " (hidden)" if elem.get("state") in ("hidden", "veryHidden") else ""
                found.append((f"{elem.get('name') or rel_id}{hidden}", targets[rel_id]))
    return found


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
        table: Element | None = None
        for event, elem in parse_events(package, part, ("start", "end")):
            if event == "start":
                if table is None:
                    table = elem
                continue
            if local(elem.tag) == "si":
                strings.append(_string(elem))
                if table is not None:
                    table.clear()
    return strings


def _string(item: Element) -> str:
    """The text of a shared or inline string: its t, or the t of each rich-text run."""
    parts: list[str] = []
    for child in item:
        name = local(child.tag)
        if name == "t":
            parts.append(child.text or "")
        elif name == "r":
            parts.extend(t.text or "" for t in child if local(t.tag) == "t")
    return "".join(parts)


def _rows(package: Package, part: str, strings: list[str], sink: Sink, sheet: str) -> None:
    """Stream one sheet's rows into `sink`, one tab-separated line each."""
    tags: _Tags | None = None
    data: Element | None = None
    columns: dict[str, int] = {}
    row_number = ""
    try:
        for batch in parse_batches(package, part, ("start", "end")):
            for event, elem in batch:
                if event == "start":
                    if tags is None:
                        tags = _Tags(elem.tag)
                    elif data is None and elem.tag == tags.sheet_data:
                        data = elem
                    continue
                if tags is None or elem.tag != tags.row:
                    continue
                row_number = elem.get("r") or row_number
                line = _row(elem, tags, strings, columns)
                if line:
                    sink.add(line + "\n")
                if data is not None:
                    data.clear()  # the rows read so far go; the tree stays one row deep
    except Full:
        sink.cut_at = f"sheet {sheet!r}, row {row_number}" if row_number else sink.cut_at
        raise


class _Tags:
    """The tags of a sheet's elements in its namespace (transitional or strict OOXML)."""

    def __init__(self, root: str) -> None:
        ns = root[: root.index("}") + 1] if root.startswith("{") else ""
        self.sheet_data = f"{ns}sheetData"
        self.row = f"{ns}row"
        self.value = f"{ns}v"
        self.inline = f"{ns}is"


def _row(row: Element, tags: _Tags, strings: list[str], columns: dict[str, int]) -> str:
    """One row as tab-separated values, each cell in its column; "" for an empty row."""
    values: list[str] = []
    for cell in row:
        ref = cell.get("r")
        if ref:
            letters = ref.rstrip("0123456789")
            column = columns.get(letters)
            if column is None:
                column = columns[letters] = _column(letters)
            if column > len(values):
                values.extend([""] * (column - len(values)))
        values.append(_value(cell, tags, strings))
    return "\t".join(values).rstrip("\t")


def _value(cell: Element, tags: _Tags, strings: list[str]) -> str:
    kind = cell.get("t")
    if kind == "inlineStr":
        inline = cell.find(tags.inline)
        text = _string(inline) if inline is not None else ""
    else:
        value = cell.find(tags.value)
        raw = (value.text or "") if value is not None else ""
        if kind == "s":
            try:
                text = strings[int(raw)]
            except (ValueError, IndexError):
                text = ""
        elif kind == "b":
            text = "TRUE" if raw == "1" else "FALSE" if raw == "0" else raw
        elif kind is None or kind == "n":
            text = _number(raw)
        else:  # str (a formula's text), e (an error such as #DIV/0!), d (an ISO date)
            text = raw
    if "\t" in text or "\n" in text:
        text = " ".join(text.split())  # a cell stays one field of its line
    return text


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
