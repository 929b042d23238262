"""Real documents written by code for the read_document tests and benchmark: a minimal
PDF writer, and DOCX, XLSX and PPTX packages as zipfile + the XML Office writes."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
P = "http://schemas.openxmlformats.org/presentationml/2006/main"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
PKG = "http://schemas.openxmlformats.org/package/2006/relationships"
CT = "http://schemas.openxmlformats.org/package/2006/content-types"
OD = "application/vnd.openxmlformats-officedocument"
XML = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'


def pdf_bytes(pages: Sequence[Sequence[str]]) -> bytes:
    """A PDF whose pages show `pages`' lines in Helvetica (one content stream each)."""
    count = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for index, lines in enumerate(pages):
        ops = ["BT /F1 11 Tf 14 TL 72 770 Td"]
        for line in lines:
            safe = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            ops.append(f"({safe}) Tj T*")
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font "
            f"<< /F1 3 0 R >> >> /Contents {5 + 2 * index} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def encrypted_pdf(
    pages: Sequence[Sequence[str]], password: str, algorithm: str = "RC4-128"
) -> bytes:
    """`pdf_bytes(pages)` encrypted by pypdf's writer with user password `password`."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes(pages))))
    writer.encrypt(user_password=password, owner_password="owner", algorithm=algorithm)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def package(parts: dict[str, str | bytes], overrides: dict[str, str]) -> bytes:
    """A zip of `parts` with a [Content_Types].xml overriding each of `overrides`."""
    types = "".join(
        f'<Override PartName="/{name}" ContentType="{kind}"/>' for name, kind in overrides.items()
    )
    content_types = (
        f'{XML}<Types xmlns="{CT}">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
        'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
        f"{types}</Types>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", content_types)
        for name, data in parts.items():
            archive.writestr(name, data)
    return out.getvalue()


def rels(*targets: tuple[str, str, str]) -> str:
    """A relationships part of (id, type's last segment, target) triples."""
    items = "".join(
        f'<Relationship Id="{rid}" Type="{R}/{kind}" Target="{target}"/>'
        for rid, kind, target in targets
    )
    return f'{XML}<Relationships xmlns="{PKG}">{items}</Relationships>'


def _root_rels(main: str) -> str:
    return rels(("rId1", "officeDocument", main))


def _w_paragraph(text: str, extra: str = "") -> str:
    return f'<w:p><w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r>{extra}</w:p>'


def docx_bytes(
    paragraphs: Sequence[str],
    *,
    table: Sequence[Sequence[str]] = (),
    footnote: str = "",
    endnote: str = "",
) -> bytes:
    """A DOCX of `paragraphs`, a table, and a footnote and an endnote referred to from the
    first paragraph (with the separator notes Word writes, which are not text)."""
    body = []
    for index, text in enumerate(paragraphs):
        refs = ""
        if index == 0 and footnote:
            refs += '<w:r><w:footnoteReference w:id="1"/></w:r>'
        if index == 0 and endnote:
            refs += '<w:r><w:endnoteReference w:id="1"/></w:r>'
        body.append(_w_paragraph(text, refs))
    if table:
        rows = "".join(
            "<w:tr>" + "".join(f"<w:tc>{_w_paragraph(cell)}</w:tc>" for cell in row) + "</w:tr>"
            for row in table
        )
        body.append(f"<w:tbl>{rows}</w:tbl>")
    body.append(
        "<w:p><w:r><w:delText>deleted words</w:delText></w:r>"
        "<w:r><w:instrText> PAGE </w:instrText></w:r></w:p>"
    )
    document = f'{XML}<w:document xmlns:w="{W}"><w:body>{"".join(body)}</w:body></w:document>'
    parts: dict[str, str | bytes] = {
        "_rels/.rels": _root_rels("word/document.xml"),
        "word/document.xml": document,
    }
    overrides = {"word/document.xml": f"{OD}.wordprocessingml.document.main+xml"}
    doc_rels: list[tuple[str, str, str]] = []
    notes_of = (("footnotes", "footnote", footnote), ("endnotes", "endnote", endnote))
    for kind, element, text in notes_of:
        if not text:
            continue
        notes = (
            f'{XML}<w:{kind} xmlns:w="{W}">'
            f'<w:{element} w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p>'
            f"</w:{element}>"
            f'<w:{element} w:id="1">{_w_paragraph(text)}</w:{element}></w:{kind}>'
        )
        parts[f"word/{kind}.xml"] = notes
        overrides[f"word/{kind}.xml"] = f"{OD}.wordprocessingml.{kind}+xml"
        doc_rels.append((f"rId{len(doc_rels) + 1}", kind, f"{kind}.xml"))
    parts["word/_rels/document.xml.rels"] = rels(*doc_rels)
    return package(parts, overrides)


@dataclass(frozen=True)
class Formatted:
    """A number shown through a number format: a custom format code, or a built-in
    format's id (14 is a date, 20 a time of day)."""

    value: float
    format: str | int


Cell = str | int | float | Formatted


def xlsx_bytes(
    sheets: dict[str, Sequence[Sequence[Cell]]],
    *,
    inline: bool | Collection[str] = False,
    rich: Collection[str] = (),
    date1904: bool = False,
) -> bytes:
    """An XLSX of `sheets` (name -> rows). Text cells are shared strings, or inline
    strings: all with `inline=True`, those named with a collection; numbers are numbers.
    A shared string named in `rich` is written as Excel writes formatted text: two runs,
    and a phonetic guide (rPh) that is not part of the text. A Formatted number gets a
    cell style of its format (a styles part as Excel writes it); `date1904` sets the
    workbook's 1904 date system."""
    shared: dict[str, int] = {}
    styles: dict[str | int, int] = {}  # number format -> its cell style (0 is General)
    parts: dict[str, str | bytes] = {"_rels/.rels": _root_rels("xl/workbook.xml")}
    overrides = {"xl/workbook.xml": f"{OD}.spreadsheetml.sheet.main+xml"}
    sheet_list = []
    book_rels = []
    for number, (name, rows) in enumerate(sheets.items(), start=1):
        lines = []
        for row_number, row in enumerate(rows, start=1):
            cells = []
            for column, value in enumerate(row):
                ref = f"{_letters(column)}{row_number}"
                if isinstance(value, str) and (
                    inline is True or (not isinstance(inline, bool) and value in inline)
                ):
                    cells.append(f'<c r="{ref}" t="inlineStr"><is><t>{escape(value)}</t></is></c>')
                elif isinstance(value, str):
                    index = shared.setdefault(value, len(shared))
                    cells.append(f'<c r="{ref}" t="s"><v>{index}</v></c>')
                elif isinstance(value, Formatted):
                    style = styles.setdefault(value.format, len(styles) + 1)
                    cells.append(f'<c r="{ref}" s="{style}"><v>{value.value}</v></c>')
                else:
                    cells.append(f'<c r="{ref}"><v>{value}</v></c>')
            lines.append(f'<row r="{row_number}">{"".join(cells)}</row>')
        parts[f"xl/worksheets/sheet{number}.xml"] = (
            f'{XML}<worksheet xmlns="{S}"><sheetData>{"".join(lines)}</sheetData></worksheet>'
        )
        overrides[f"xl/worksheets/sheet{number}.xml"] = f"{OD}.spreadsheetml.worksheet+xml"
        sheet_list.append(f'<sheet name="{escape(name)}" sheetId="{number}" r:id="rId{number}"/>')
        book_rels.append((f"rId{number}", "worksheet", f"worksheets/sheet{number}.xml"))
    if shared:
        items = "".join(_shared_item(text, text in rich) for text in shared)
        parts["xl/sharedStrings.xml"] = (
            f'{XML}<sst xmlns="{S}" count="{len(shared)}" uniqueCount="{len(shared)}">{items}</sst>'
        )
        book_rels.append((f"rId{len(book_rels) + 1}", "sharedStrings", "sharedStrings.xml"))
    if styles:
        parts["xl/styles.xml"] = _styles(styles)
        overrides["xl/styles.xml"] = f"{OD}.spreadsheetml.styles+xml"
        book_rels.append((f"rId{len(book_rels) + 1}", "styles", "styles.xml"))
    properties = '<workbookPr date1904="1"/>' if date1904 else ""
    parts["xl/workbook.xml"] = (
        f'{XML}<workbook xmlns="{S}" xmlns:r="{R}">{properties}'
        f"<sheets>{''.join(sheet_list)}</sheets></workbook>"
    )
    parts["xl/_rels/workbook.xml.rels"] = rels(*book_rels)
    return package(parts, overrides)


def _styles(styles: dict[str | int, int]) -> str:
    """A styles part: custom formats numbered from 164 (as Excel does), a cell style per
    format after the default one, and a cellStyleXfs list the reader must not count."""
    custom = {code: 164 + n for n, code in enumerate(c for c in styles if isinstance(c, str))}
    formats = "".join(
        f'<numFmt numFmtId="{number}" formatCode="{escape(code, {chr(34): "&quot;"})}"/>'
        for code, number in custom.items()
    )
    xfs = '<xf numFmtId="0"/>' + "".join(
        f'<xf numFmtId="{custom[code] if isinstance(code, str) else code}" applyNumberFormat="1"/>'
        for code in styles
    )
    return (
        f'{XML}<styleSheet xmlns="{S}"><numFmts count="{len(custom)}">{formats}</numFmts>'
        '<cellStyleXfs count="2"><xf numFmtId="14"/><xf numFmtId="14"/></cellStyleXfs>'
        f'<cellXfs count="{len(styles) + 1}">{xfs}</cellXfs></styleSheet>'
    )


def _shared_item(text: str, rich: bool) -> str:
    if not rich:
        return f"<si><t>{escape(text)}</t></si>"
    half = len(text) // 2
    runs = "".join(
        f'<r><rPr><b/></rPr><t xml:space="preserve">{escape(part)}</t></r>'
        for part in (text[:half], text[half:])
    )
    return f'{runs.join(["<si>", ""])}<rPh sb="0" eb="1"><t>guide</t></rPh></si>'


def _letters(column: int) -> str:
    letters = ""
    column += 1
    while column:
        column, rest = divmod(column - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def _shape(texts: Sequence[str], placeholder: str = "") -> str:
    ph = f'<p:nvPr><p:ph type="{placeholder}"/></p:nvPr>' if placeholder else "<p:nvPr/>"
    paragraphs = "".join(f"<a:p><a:r><a:t>{escape(t)}</a:t></a:r></a:p>" for t in texts)
    return (
        f'<p:sp><p:nvSpPr><p:cNvPr id="2" name="s"/><p:cNvSpPr/>{ph}</p:nvSpPr>'
        f"<p:txBody><a:bodyPr/>{paragraphs}</p:txBody></p:sp>"
    )


def _slide(root: str, shapes: str) -> str:
    return (
        f'{XML}<p:{root} xmlns:p="{P}" xmlns:a="{A}" xmlns:r="{R}"><p:cSld><p:spTree>'
        f"{shapes}</p:spTree></p:cSld></p:{root}>"
    )


def pptx_bytes(slides: Sequence[tuple[Sequence[str], str]]) -> bytes:
    """A PPTX of (texts, notes) slides; a slide's notes page also holds a slide number,
    which is not part of its notes. Slide parts are numbered in reverse of the show's
    order, so a reader that follows part names gets them wrong."""
    count = len(slides)
    parts: dict[str, str | bytes] = {"_rels/.rels": _root_rels("ppt/presentation.xml")}
    overrides = {"ppt/presentation.xml": f"{OD}.presentationml.presentation.main+xml"}
    ids = []
    pres_rels = []
    for position, (texts, notes) in enumerate(slides, start=1):
        number = count - position + 1
        parts[f"ppt/slides/slide{number}.xml"] = _slide("sld", _shape(texts))
        overrides[f"ppt/slides/slide{number}.xml"] = f"{OD}.presentationml.slide+xml"
        if notes:
            parts[f"ppt/notesSlides/notesSlide{number}.xml"] = _slide(
                "notes", _shape([str(number)], "sldNum") + _shape([notes], "body")
            )
            overrides[f"ppt/notesSlides/notesSlide{number}.xml"] = (
                f"{OD}.presentationml.notesSlide+xml"
            )
            parts[f"ppt/slides/_rels/slide{number}.xml.rels"] = rels(
                ("rId1", "notesSlide", f"../notesSlides/notesSlide{number}.xml")
            )
        ids.append(f'<p:sldId id="{255 + position}" r:id="rId{position}"/>')
        pres_rels.append((f"rId{position}", "slide", f"slides/slide{number}.xml"))
    parts["ppt/presentation.xml"] = (
        f'{XML}<p:presentation xmlns:p="{P}" xmlns:r="{R}"><p:sldIdLst>{"".join(ids)}'
        "</p:sldIdLst></p:presentation>"
    )
    parts["ppt/_rels/presentation.xml.rels"] = rels(*pres_rels)
    return package(parts, overrides)
