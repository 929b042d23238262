"""DOCX: the body's paragraphs and tables (a row a line, cells tab-separated), then the
footnotes and endnotes, each marked where the body refers to it ([1], [e1]).

Only the document's visible text is taken: w:t runs (tracked deletions and field
codes are other elements), tabs and breaks; of the alternatives Word writes for a
drawing (mc:Choice and mc:Fallback) only the first, so a text box is read once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from .ooxml import Package, local, stream
from .output import Full, Sink

_SKIP = frozenset({"Fallback", "delText", "instrText"})
_NOTES = (("footnotes", "footnote", ""), ("endnotes", "endnote", "e"))
_SEPARATORS = frozenset({"separator", "continuationSeparator", "continuationNotice"})


def read_docx(package: Package, main: str, sink: Sink) -> str:
    """Add the document's text to `sink` until it is full; returns the summary ("DOCX")."""
    with contextlib.suppress(Full):  # the sink is full: the note says where it was cut
        sink.where = "the body"
        _Text(sink.add).read(package, main)
        for kind, element, prefix in _NOTES:
            for part in package.related(main, kind):
                sink.where = f"the {kind}"
                _Notes(sink, kind, element, prefix).read(package, part)
    return "DOCX"


class _Text:
    """Word paragraphs and tables from parse events, each finished line given to `put`."""

    def __init__(self, put: Callable[[str], None]) -> None:
        self.put = put
        self.paragraphs: list[list[str]] = []  # open paragraphs (text boxes nest them)
        self.cells: list[list[str]] = []  # open table cells: their finished lines
        self.rows: list[list[str]] = []  # open table rows: their finished cells
        self.skipping = 0  # depth inside an element whose text is not shown

    def read(self, package: Package, part: str) -> None:
        for started, elem in stream(package, part):
            if started:
                self.start(local(elem.tag), elem.attrib)
            else:
                self.end(local(elem.tag), elem.text, elem.attrib)

    def start(self, name: str, attrib: dict[str, str]) -> None:
        if name in _SKIP:
            self.skipping += 1
        elif self.skipping:
            return
        elif name == "p":
            self.paragraphs.append([])
        elif name == "tc":
            self.cells.append([])
        elif name == "tr":
            self.rows.append([])

    def end(self, name: str, text: str | None, attrib: dict[str, str]) -> None:
        if name in _SKIP:
            self.skipping -= 1
            return
        if self.skipping:
            return
        words = self.paragraphs[-1] if self.paragraphs else None
        if name == "t" and words is not None:
            words.append(text or "")
        elif name == "tab" and words is not None:
            words.append("\t")
        elif name in ("br", "cr") and words is not None:
            words.append("\n")
        elif name in ("footnoteReference", "endnoteReference") and words is not None:
            prefix = "e" if name == "endnoteReference" else ""
            words.append(f"[{prefix}{_attribute(attrib, 'id')}]")
        elif name == "p" and self.paragraphs:
            line = "".join(self.paragraphs.pop())
            if line.strip():
                self.line(line)
        elif name == "tc" and self.cells and self.rows:
            cell = " ".join(self.cells.pop())
            self.rows[-1].append(" ".join(cell.split()))
        elif name == "tr" and self.rows:
            row = "\t".join(self.rows.pop()).rstrip("\t")
            if row.strip():
                self.line(row)

    def line(self, line: str) -> None:
        """A finished line: into the open table cell, if any, else out."""
        if self.cells:
            self.cells[-1].append(line)
        else:
            self.put(line + "\n")


class _Notes:
    """The footnotes or endnotes part: each note as "[N] text" under one heading."""

    def __init__(self, sink: Sink, kind: str, element: str, prefix: str) -> None:
        self.sink = sink
        self.kind = kind
        self.element = element
        self.prefix = prefix
        self.heading = False

    def read(self, package: Package, part: str) -> None:
        lines: list[str] = []
        text = _Text(lines.append)
        note_id = ""
        shown = True
        for started, elem in stream(package, part):
            name = local(elem.tag)
            if name == self.element:
                if started:
                    lines.clear()
                    note_id = _attribute(elem.attrib, "id")
                    shown = _attribute(elem.attrib, "type") not in _SEPARATORS
                elif shown and lines:
                    self.note(note_id, " ".join(line.strip() for line in lines))
            elif started:
                text.start(name, elem.attrib)
            else:
                text.end(name, elem.text, elem.attrib)

    def note(self, note_id: str, text: str) -> None:
        if not self.heading:
            self.heading = True
            self.sink.add(f"--- {self.kind} ---\n")
        self.sink.add(f"[{self.prefix}{note_id}] {text}\n")


def _attribute(attrib: dict[str, str], name: str) -> str:
    """An attribute by its local name (w:id is "{ns}id" in the parsed element)."""
    for key, value in attrib.items():
        if local(key) == name:
            return value
    return ""
