"""One document in, its text out: the format sniffed from the bytes, then its reader.

`read_document` is what both the tool and the chat attachments use. It runs in a
worker thread (the parsers are synchronous and CPU-bound) and raises DocumentError,
whose one line names the file and why, for anything it cannot read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from .errors import DocumentError, NotADocument
from .output import MAX_OUTPUT_BYTES, Sink
from .ranges import Ranges, parse_ranges
from .sniff import HEAD_BYTES, describe, sniff

READS = "PDF, DOCX, XLSX, PPTX, HTML or text"
# How far into an OLE compound file to look for the stream an encrypted Office file has.
_OLE_SCAN_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Document:
    """A document's text: what it is ("PDF, 12 pages"), the text, and the note said
    after it ("" for a whole text; else where it was cut and how to read on)."""

    summary: str
    text: str
    note: str

    def render(self, name: str) -> str:
        """The text as the model reads it: a first line naming the file, then the text."""
        body = self.text.rstrip("\n")
        parts = [f"[{name}: {self.summary}]", body, self.note]
        return "\n".join(part for part in parts if part) + "\n"


def read_document(
    handle: IO[bytes],
    name: str,
    *,
    pages: str | None = None,
    sheet: str | None = None,
    offset: int = 0,
    limit: int = MAX_OUTPUT_BYTES,
) -> Document:
    """The text of the document open in `handle` (named `name` in errors and notes).

    `pages` picks PDF pages or PPTX slides ("1-5,8,12-"), `sheet` one XLSX sheet (by
    name or number); `offset` skips that many characters of the text; the text stops
    at `limit` UTF-8 bytes, the note saying where and with which offset to read on.
    """
    kind = sniff(handle)
    ranges = parse_ranges(pages, "pages") if pages else None
    sink = Sink(limit, offset)
    if kind == "pdf":
        _options(name, "a PDF", pages, sheet, pages_ok=True)
        from .pdf import read_pdf

        summary = read_pdf(handle, name, sink, ranges)
    elif kind == "zip":
        summary = _office(handle, name, sink, ranges, sheet)
    elif kind == "ole":
        raise DocumentError(_ole(handle, name))
    elif kind == "html":
        _options(name, "an HTML page", pages, sheet)
        from .markup import read_html

        summary = read_html(handle, sink)
    elif kind == "text":
        _options(name, "plain text", pages, sheet)
        from .plain import read_text

        summary = read_text(handle, sink)
    else:
        handle.seek(0)
        what = describe(handle.read(HEAD_BYTES)) or "a binary file"
        hint = "; look at it with view_image" if what.endswith("image") else ""
        raise NotADocument(f"{name} is {what}, not a document read_document reads ({READS}){hint}")
    return Document(summary, sink.text(), sink.note())


def _office(
    handle: IO[bytes], name: str, sink: Sink, ranges: Ranges | None, sheet: str | None
) -> str:
    """A zip: the Office format its main part names, read; any other zip is refused."""
    from .ooxml import Package

    package = Package(handle, name)
    kind, main = package.main_part()
    pages = ranges.text if ranges is not None else None
    if kind == "docx":
        _options(name, "a DOCX", pages, sheet)
        from .docx import read_docx

        return read_docx(package, main, sink)
    if kind == "xlsx":
        _options(name, "an XLSX", pages, sheet, sheet_ok=True)
        from .xlsx import read_xlsx

        return read_xlsx(package, main, sink, sheet)
    if kind == "pptx":
        _options(name, "a PPTX", pages, sheet, pages_ok=True)
        from .pptx import read_pptx

        return read_pptx(package, main, sink, ranges)
    raise NotADocument(f"{name} is a zip archive, not a document read_document reads ({READS})")


def _options(
    name: str,
    kind: str,
    pages: str | None,
    sheet: str | None,
    *,
    pages_ok: bool = False,
    sheet_ok: bool = False,
) -> None:
    """Refuse an option the document's format has no use for, saying what it is for."""
    if pages and not pages_ok:
        raise DocumentError(f"pages picks PDF pages or PPTX slides; {name} is {kind}")
    if sheet and not sheet_ok:
        raise DocumentError(f"sheet picks a sheet of an XLSX; {name} is {kind}")


def _ole(handle: IO[bytes], name: str) -> str:
    """Why an OLE compound file is not read: a password-protected Office file (its
    EncryptionInfo stream) or a legacy binary .doc/.xls/.ppt."""
    handle.seek(0)
    if "EncryptionInfo".encode("utf-16-le") in handle.read(_OLE_SCAN_BYTES):
        return f"{name} is a password-protected Office document; it needs its password"
    return (
        f"{name} is a legacy binary Office file (.doc, .xls or .ppt), which read_document "
        "does not read; saved as .docx, .xlsx or .pptx it can be read"
    )
