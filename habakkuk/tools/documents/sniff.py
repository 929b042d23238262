"""What a file is, told from its bytes, never from its name: a .docx that is really a PDF
is read as the PDF it is."""

from __future__ import annotations

import codecs
import re
from typing import IO, Literal

Format = Literal["pdf", "zip", "ole", "html", "text", "binary"]

HEAD_BYTES = 8192
_OLE = bytes.fromhex("D0CF11E0A1B11AE1")
# A page starts with its doctype or html, head or body tag (after an XML declaration
# and comments): text that merely mentions <html> further on stays text.
_HTML = re.compile(
    rb"^(?:\s|<\?xml[^>]*>|<!--.*?-->)*<(?:!doctype\s+html|html|head|body)[\s>/]",
    re.IGNORECASE | re.DOTALL,
)
# Formats told apart only to say what they are: read_document reads none of them.
_OTHER = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!", "a RAR archive"),
    (b"{\\rtf", "an RTF document"),
)


def sniff(handle: IO[bytes]) -> Format:
    """The format of the file open in `handle` (read from its start; left at its start).

    "zip" is any zip (the Office formats are told apart by the parts inside, see
    ooxml.Package.main_part); "ole" a compound file (an encrypted Office document or
    a legacy .doc/.xls/.ppt); "text" bytes that read as text, "binary" anything else.
    """
    handle.seek(0)
    head = handle.read(HEAD_BYTES)
    handle.seek(0)
    return sniff_bytes(head)


def sniff_bytes(head: bytes) -> Format:
    """The format of a file that starts with `head` (its first HEAD_BYTES bytes)."""
    if b"%PDF-" in head[:1024]:
        return "pdf"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head.startswith(_OLE):
        return "ole"
    text = _as_text(head)
    if text is None:
        return "binary"
    if _HTML.match(text.encode("utf-8", errors="ignore")):
        return "html"
    return "text"


def describe(head: bytes) -> str:
    """What a file read_document does not read seems to be ("a PNG image"), or ""."""
    if head[8:12] == b"WEBP" and head.startswith(b"RIFF"):
        return "a WebP image"
    for magic, what in _OTHER:
        if head.startswith(magic):
            return what
    return ""


def text_encoding(head: bytes) -> str:
    """The encoding to decode a text file with: a byte-order mark's, else UTF-8."""
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    return "utf-8"


def _as_text(head: bytes) -> str | None:
    """`head` decoded, if it is text: UTF-16 with its byte-order mark, or bytes without
    NULs that are UTF-8 (a character cut at the end of the head is fine)."""
    encoding = text_encoding(head)
    if encoding == "utf-16":
        return head.decode("utf-16", errors="replace")
    if b"\0" in head:
        return None
    try:
        return head.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:
            return None
        return head[: exc.start].decode("utf-8-sig")
