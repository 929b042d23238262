"""The zip and XML reading the Office formats (DOCX, XLSX, PPTX) share, safe on hostile files.

A zip's headers say how big each member is; a zip bomb lies there, or is honest about
a gigabyte of zeros compressed to a few kilobytes. So no size in a header is trusted:
`Package` uses zipfile only for the directory (names and where each member starts),
inflates every member itself, counting the bytes as they come out, and refuses the
file once the members read from it reach MAX_UNPACKED_BYTES (64 MB) in total. Each
member's CRC is checked at its end, so a damaged one is an error, not wrong text.

Parts are parsed with xml.etree's pull parser as a stream of starts and ends that
never holds more than the open path of elements (`stream`), and a part that declares
a DTD or an entity is refused before the parser sees it (the Office formats never use
them; entity expansion is what an XML bomb is made of). The scan looks for the
declaration as UTF-8 and UTF-16 bytes, and a part in any other encoding (where the
scan could not see it) is refused too.
"""

from __future__ import annotations

import codecs
import posixpath
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, cast

from .errors import DocumentError

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

MAX_UNPACKED_BYTES = 64 * 1024 * 1024
# The zip directory is read whole by zipfile; a real document has hundreds of entries,
# a hostile one could have millions (each costs memory before any size is checked).
MAX_ENTRIES = 20_000
CONTENT_TYPES = "[Content_Types].xml"
_CHUNK = 64 * 1024
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature ... name length, extra length
_END_RECORD = struct.Struct("<4s4H2LH")
_DECLARATIONS = tuple(
    word.encode(encoding)
    for word in ("<!DOCTYPE", "<!ENTITY")
    for encoding in ("utf-8", "utf-16-le", "utf-16-be")
)
_Events = Iterator[tuple[str, "Element"]]
_ENCODING = re.compile(rb"""^\s*<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")

# The main part's content type says which Office format a package is.
_MAIN_KINDS = (
    ("wordprocessingml", "docx"),
    ("ms-word", "docx"),
    ("spreadsheetml", "xlsx"),
    ("ms-excel", "xlsx"),
    ("presentationml", "pptx"),
    ("ms-powerpoint", "pptx"),
)


@dataclass(frozen=True)
class Relationship:
    """One relationship of a part: its id, type (the URI's last segment) and target part."""

    id: str
    type: str
    target: str


class Package:
    """An Office file's zip: its parts by name, read through one shared byte budget."""

    def __init__(self, handle: IO[bytes], name: str, budget: int = MAX_UNPACKED_BYTES) -> None:
        self.name = name
        self.budget = budget
        self.unpacked = 0  # bytes inflated from this file so far, every member counted
        self._handle = handle
        _check_directory(handle, name)
        try:
            self._zip = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise DocumentError(f"{name} is a broken zip file ({exc})") from None
        self._parts = {info.filename.lower(): info for info in self._zip.infolist()}
        self._types: dict[str, str] | None = None

    def has(self, part: str) -> bool:
        """Whether the package holds `part` (names compare without case, as OPC's do)."""
        return part.lstrip("/").lower() in self._parts

    def open(self, part: str) -> PartReader:
        """A reader of `part`'s inflated bytes (DocumentError if there is no such part)."""
        info = self._parts.get(part.lstrip("/").lower())
        if info is None:
            raise DocumentError(f"{self.name} is broken: its part {part} is missing")
        return PartReader(self, info)

    def spend(self, size: int) -> None:
        """Count `size` more inflated bytes; a file past the budget is refused as a zip bomb."""
        self.unpacked += size
        if self.unpacked > self.budget:
            raise DocumentError(
                f"{self.name} unpacks to more than {self.budget // (1024 * 1024)} MB "
                "(a zip bomb, or far more than a document holds); refused"
            )

    def read_at(self, offset: int, size: int) -> bytes:
        """`size` raw bytes of the file from `offset` (members share the one handle)."""
        self._handle.seek(offset)
        return self._handle.read(size)

    def content_types(self) -> dict[str, str]:
        """Part name (lower case, no leading slash) -> content type, from the overrides."""
        if self._types is None:
            types: dict[str, str] = {}
            for elem in parse(self, CONTENT_TYPES):
                if local(elem.tag) == "Override":
                    part = (elem.get("PartName") or "").lstrip("/").lower()
                    types[part] = elem.get("ContentType") or ""
            self._types = types
        return self._types

    def main_part(self) -> tuple[str, str]:
        """The format ("docx", "xlsx" or "pptx") and the name of its main part, or
        ("", "") for a zip that is no Office document."""
        if not self.has(CONTENT_TYPES):
            return "", ""
        for part, content_type in self.content_types().items():
            if not content_type.endswith(".main+xml"):
                continue
            for marker, kind in _MAIN_KINDS:
                if marker in content_type:
                    return kind, part
        return "", ""

    def relationships(self, part: str) -> list[Relationship]:
        """The relationships of `part` (its _rels/NAME.rels), targets resolved to part names."""
        folder, leaf = posixpath.split(part.lstrip("/"))
        rels = posixpath.join(folder, "_rels", f"{leaf}.rels")
        if not self.has(rels):
            return []
        found: list[Relationship] = []
        for elem in parse(self, rels):
            if local(elem.tag) == "Relationship" and elem.get("TargetMode") != "External":
                target = elem.get("Target") or ""
                if target.startswith("/"):
                    resolved = target.lstrip("/")
                else:
                    resolved = posixpath.normpath(posixpath.join(folder, target))
                kind = (elem.get("Type") or "").rsplit("/", 1)[-1]
                found.append(Relationship(elem.get("Id") or "", kind, resolved))
        return found

    def related(self, part: str, kind: str) -> list[str]:
        """The parts `part` relates to with relationship type `kind` (e.g. "footnotes")."""
        return [rel.target for rel in self.relationships(part) if rel.type == kind]


class PartReader:
    """One member's inflated bytes, read in pieces: counted against the package's
    budget, scanned for DTD and entity declarations, CRC-checked at the end."""

    def __init__(self, package: Package, info: zipfile.ZipInfo) -> None:
        self._package = package
        self._info = info
        self.name = info.filename
        if info.flag_bits & 0x1:
            raise DocumentError(f"{package.name} is encrypted (its part {self.name} is)")
        if info.compress_type == zipfile.ZIP_DEFLATED:
            self._inflate: zlib._Decompress | None = zlib.decompressobj(-zlib.MAX_WBITS)
        elif info.compress_type == zipfile.ZIP_STORED:
            self._inflate = None
        else:
            raise DocumentError(
                f"{package.name}: part {self.name} uses zip compression method "
                f"{info.compress_type}, which Office files do not use"
            )
        header = package.read_at(info.header_offset, _LOCAL_HEADER.size)
        if len(header) < _LOCAL_HEADER.size:
            raise DocumentError(f"{package.name} is broken (cut short: part {self.name})")
        signature, name_length, extra_length = _LOCAL_HEADER.unpack(header)
        if signature != b"PK\x03\x04":
            raise DocumentError(f"{package.name} is a broken zip file (part {self.name})")
        self._offset = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
        self._left = info.compress_size  # compressed bytes not yet read from the file
        self._crc = 0
        self._done = False
        self._first = True
        self._tail = b""  # the end of the last piece: a declaration may span two pieces

    def read(self, size: int = -1) -> bytes:
        """Up to `size` inflated bytes (b"" at the end)."""
        want = _CHUNK if size is None or size <= 0 else size
        data = b""
        while not data and not self._done:
            data = self._next(want)
        if data:
            self._package.spend(len(data))
            self._check(data)
            self._crc = zlib.crc32(data, self._crc)
        elif self._crc != self._info.CRC:
            raise DocumentError(f"{self._package.name} is broken (bad checksum in {self.name})")
        return data

    def _next(self, want: int) -> bytes:
        inflate = self._inflate
        if inflate is not None and inflate.unconsumed_tail:
            return inflate.decompress(inflate.unconsumed_tail, want)
        if inflate is not None and inflate.eof:
            self._done = True
            return b""
        raw = b""
        if self._left > 0:
            raw = self._package.read_at(self._offset, min(self._left, _CHUNK))
            self._offset += len(raw)
            self._left -= len(raw)
        if not raw:
            self._done = True
            if inflate is not None and not inflate.eof:
                raise DocumentError(f"{self._package.name} is broken (cut short in {self.name})")
            return b""
        if inflate is None:
            return raw
        try:
            return inflate.decompress(raw, want)
        except zlib.error as exc:
            raise DocumentError(f"{self._package.name} is broken ({self.name}: {exc})") from None

    def _check(self, data: bytes) -> None:
        if self._first:
            self._first = False
            declared = _ENCODING.match(data)
            if declared is not None:
                _check_encoding(declared.group(1).decode("ascii"), self._package.name, self.name)
        window = self._tail + data
        if any(word in window for word in _DECLARATIONS):
            raise DocumentError(
                f"{self._package.name}: part {self.name} declares a DTD or entities, which "
                "Office files never do; refused"
            )
        self._tail = window[-20:]


def parse(package: Package, part: str) -> Iterator[Element]:
    """The elements of `part` as each ends (its attributes and text are there; its
    children are gone, see `stream`)."""
    for started, elem in stream(package, part):
        if not started:
            yield elem


def stream(package: Package, part: str) -> Iterator[tuple[bool, Element]]:
    """(started, element) for each start and end of an element of `part`, in order.

    The tree is never more than the open path: once the consumer has handled an
    element's end, the element is dropped from its parent. So an extractor reads an
    element's attributes (at its start or end) and its own text (at its end), never
    its children, and a hostile part (a row of a million cells, a paragraph of a
    million runs) costs no more memory than a short one. Broken XML is a DocumentError.
    """
    from xml.etree.ElementTree import ParseError, XMLPullParser

    reader = package.open(part)
    parser: XMLPullParser[Element] = XMLPullParser(("start", "end"))
    path: list[Element] = []
    try:
        while True:
            data = reader.read(_CHUNK)
            if data:
                parser.feed(data)
            else:
                parser.close()
            for event, elem in cast(_Events, parser.read_events()):
                if event == "start":
                    path.append(elem)
                    yield True, elem
                    continue
                path.pop()
                yield False, elem
                if path:
                    del path[-1][:]  # its only child: the ones before it went the same way
            if not data:
                return
    except ParseError as exc:
        raise DocumentError(f"{package.name} is broken ({reader.name}: {exc})") from None


def local(tag: str) -> str:
    """An element's name without its namespace ("{ns}p" -> "p")."""
    return tag.rpartition("}")[2]


def _check_encoding(encoding: str, name: str, part: str) -> None:
    """Refuse a part in an encoding the declaration scan cannot read (EBCDIC, UTF-32...)."""
    try:
        word = "<!DOCTYPE".encode(codecs.lookup(encoding).name)
    except (LookupError, UnicodeError):
        word = b""
    for mark in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        word = word.removeprefix(mark)  # "utf-16" encodes with a byte-order mark first
    if word not in _DECLARATIONS:
        raise DocumentError(f"{name}: part {part} is in encoding {encoding!r}; refused")


def _check_directory(handle: IO[bytes], name: str) -> None:
    """Refuse a zip whose directory lists more entries than a document has, before
    zipfile builds an object for each."""
    handle.seek(0, 2)
    size = handle.tell()
    handle.seek(max(0, size - _END_RECORD.size - 0xFFFF))
    tail = handle.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < _END_RECORD.size:
        raise DocumentError(f"{name} is a broken zip file (no end of directory: cut short?)")
    entries = _END_RECORD.unpack_from(tail, at)[4]
    if entries > MAX_ENTRIES:
        raise DocumentError(
            f"{name} is a zip of {entries:,} entries, more than a document has; refused"
        )
