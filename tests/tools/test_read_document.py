"""read_document: each format's text from real files built here, sniffed from the bytes;
zip bombs, XML entities, encrypted and broken files end in one clear error result."""

from __future__ import annotations

import io
import struct
import tracemalloc
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.toolkit.registry import ToolContext, ToolError, ToolRegistry
from habakkuk.tools.documents.ooxml import MAX_UNPACKED_BYTES
from habakkuk.tools.documents.reader import read_document
from habakkuk.tools.documents.tool import ReadDocument
from tests.helpers import tool_context
from tests.tools.document_files import (
    CT,
    OD,
    XML,
    Formatted,
    S,
    W,
    docx_bytes,
    encrypted_pdf,
    package,
    pdf_bytes,
    pptx_bytes,
    xlsx_bytes,
)


async def read(ctx: ToolContext, **args: Any) -> str:
    return (await ReadDocument().run(args, ctx)).text


def put(ctx: ToolContext, name: str, data: bytes) -> str:
    (ctx.workspace / name).write_bytes(data)
    return name


_MB = 1024 * 1024
THREE_PAGES = [["Intro to the report"], ["Revenue grew (a lot)"], ["Thanks for reading"]]


async def test_a_pdf_is_read_page_by_page_and_pages_pick_some(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path)
    put(ctx, "report.pdf", pdf_bytes([*THREE_PAGES, []]))
    text = await read(ctx, path="report.pdf")
    assert text.endswith("--- page 4 ---\n[no text on this page: a scan or a picture?]\n")
    assert text.startswith("[report.pdf: PDF, 4 pages]\n--- page 1 ---\nIntro to the report\n")
    assert "--- page 2 ---\nRevenue grew (a lot)\n--- page 3 ---\nThanks for reading" in text
    picked = await read(ctx, path="report.pdf", pages="2-3")
    assert "--- page 1 ---" not in picked and "--- page 4 ---" not in picked
    assert "--- page 2 ---" in picked and "--- page 3 ---" in picked
    with pytest.raises(ToolError, match=r"report.pdf has 4 pages; pages='7-9' picks none"):
        await read(ctx, path="report.pdf", pages="7-9")
    with pytest.raises(ToolError, match=r"pages='two'"):
        await read(ctx, path="report.pdf", pages="two")


async def test_a_docx_gives_its_body_tables_footnotes_and_endnotes(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path)
    data = docx_bytes(
        ["The plan has two parts.", "Both start in May."],
        table=[["Task", "Owner"], ["Design", "Ana"]],
        footnote="Parts may overlap.",
        endnote="Dates from the 2026 roadmap.",
    )
    put(ctx, "plan.docx", data)
    text = await read(ctx, path="plan.docx")
    assert text == (
        "[plan.docx: DOCX]\n"
        "The plan has two parts.[1][e1]\n"
        "Both start in May.\n"
        "Task\tOwner\n"
        "Design\tAna\n"
        "--- footnotes ---\n"
        "[1] Parts may overlap.\n"
        "--- endnotes ---\n"
        "[e1] Dates from the 2026 roadmap.\n"
    )  # the separator notes, a tracked deletion and a field code are not text


async def test_an_xlsx_gives_each_sheet_as_tab_separated_rows(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path)
    shared = xlsx_bytes(
        {"Sales": [["fruit", "kg"], ["apple", 12], ["pear", 0.1]], "Notes": [["ok", "pear"]]},
        inline={"kg", "ok"},  # the rest shared: both kinds in one workbook
        rich={"pear"},  # in runs, with a phonetic guide that is not text
    )
    inline = xlsx_bytes({"Stock": [["item", "count"], ["nails", 400]]}, inline=True)
    put(ctx, "sales.xlsx", shared)
    put(ctx, "stock.xlsx", inline)
    text = await read(ctx, path="sales.xlsx")
    assert text == (
        "[sales.xlsx: XLSX, sheets: Sales, Notes]\n"
        "--- sheet Sales ---\nfruit\tkg\napple\t12\npear\t0.1\n"
        "--- sheet Notes ---\nok\tpear\n"
    )
    assert await read(ctx, path="stock.xlsx") == (
        "[stock.xlsx: XLSX, sheets: Stock]\n--- sheet Stock ---\nitem\tcount\nnails\t400\n"
    )
    assert "--- sheet Sales ---" not in await read(ctx, path="sales.xlsx", sheet="notes")
    assert "apple\t12" in await read(ctx, path="sales.xlsx", sheet="1")
    with pytest.raises(ToolError, match=r"no sheet 'Costs'; its sheets: 'Sales', 'Notes'"):
        await read(ctx, path="sales.xlsx", sheet="Costs")
    with pytest.raises(ToolError, match=r"pages picks PDF pages or PPTX slides"):
        await read(ctx, path="sales.xlsx", pages="1")


async def test_a_sparse_row_keeps_its_cells_in_their_columns(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path)
    sheet = (
        f'{XML}<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
        '<sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>a</t></is></c>'
        '<c r="D1" t="b"><v>1</v></c></row></sheetData></worksheet>'
    )
    source = zipfile.ZipFile(io.BytesIO(xlsx_bytes({"S": [["x"]]}, inline=True)))
    with source, zipfile.ZipFile(ctx.workspace / "sparse.xlsx", "w") as out:
        for info in source.infolist():
            body = source.read(info)
            out.writestr(info.filename, sheet if info.filename.endswith("sheet1.xml") else body)
    assert "--- sheet S ---\na\t\t\tTRUE\n" in await read(ctx, path="sparse.xlsx")


async def test_dates_and_times_are_shown_as_their_style_shows_them(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path)
    row: list[str | int | float | Formatted] = [
        Formatted(46082, 14),  # built-in m/d/yyyy: 2026-03-01
        Formatted(0.6041666666666666, 20),  # built-in h:mm: 14:30
        Formatted(46082.75, "yyyy-mm-dd hh:mm"),
        Formatted(46082, "dd/mm/yyyy;@"),
        Formatted(1.5, "[h]:mm"),  # a duration of 36 hours, not a time of day
        Formatted(12.5, '#,##0.00 "days"'),  # quoted text is not a date token
        46082,  # no style: a number
    ]
    put(ctx, "times.xlsx", xlsx_bytes({"T": [row]}))
    assert (await read(ctx, path="times.xlsx")).endswith(
        "2026-03-01\t14:30:00\t2026-03-01 18:00:00\t2026-03-01\t1.5\t12.5\t46082\n"
    )
    put(ctx, "mac.xlsx", xlsx_bytes({"T": [[Formatted(0, 14), Formatted(731, 14)]]}, date1904=True))
    assert (await read(ctx, path="mac.xlsx")).endswith("1904-01-01\t1906-01-01\n")


def test_a_row_of_60000_cells_is_streamed_not_held_as_a_tree() -> None:
    cells = "".join(f'<c t="inlineStr"><is><t>cell {n}</t></is></c>' for n in range(60_000))
    sheet = (
        f'{XML}<worksheet xmlns="{S}"><sheetData><row r="1">{cells}</row></sheetData></worksheet>'
    )
    source = zipfile.ZipFile(io.BytesIO(xlsx_bytes({"S": [["x"]]}, inline=True)))
    data = io.BytesIO()
    with source, zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as out:
        for info in source.infolist():
            body = source.read(info)
            out.writestr(info.filename, sheet if info.filename.endswith("sheet1.xml") else body)
    del cells, sheet
    tracemalloc.start()
    try:
        document = read_document(data, "wide.xlsx")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert document.text.startswith("--- sheet S ---\ncell 0\tcell 1\t")
    # The 400 KB of output and its pieces; the 180,000 elements as a tree were ~40 MB.
    assert peak < 15 * _MB


async def test_a_pptx_gives_its_slides_in_show_order_with_their_notes(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path)
    put(
        ctx,
        "deck.pptx",
        pptx_bytes(
            [
                (["Quarterly review", "Revenue up 12%"], "Mention the new hires."),
                (["Next steps"], ""),
            ]
        ),
    )
    text = await read(ctx, path="deck.pptx")
    assert text == (
        "[deck.pptx: PPTX, 2 slides]\n"
        "--- slide 1 ---\nQuarterly review\nRevenue up 12%\n[notes]\nMention the new hires.\n"
        "--- slide 2 ---\nNext steps\n"
    )  # the notes page's slide number is not part of the notes
    assert await read(ctx, path="deck.pptx", pages="2") == (
        "[deck.pptx: PPTX, 2 slides]\n--- slide 2 ---\nNext steps\n"
    )


async def test_html_is_read_as_its_text_and_plain_text_passes_through(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path)
    page = (
        b"<!DOCTYPE html><html><head><title>Menu</title><style>p{}</style></head>"
        b"<body><h1>Soups</h1><p>Tomato &amp; basil</p><script>track()</script></body></html>"
    )
    put(ctx, "menu.html", page)
    assert (
        await read(ctx, path="menu.html")
        == "[menu.html: HTML]\n# Menu\n\nSoups\n\nTomato & basil\n"
    )
    put(ctx, "notes.md", "# Caf\u00e9 list\n- one\n".encode())
    assert await read(ctx, path="notes.md") == "[notes.md: text]\n# Caf\u00e9 list\n- one\n"


async def test_the_format_comes_from_the_bytes_not_the_name(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path)
    put(ctx, "letter.docx", pdf_bytes([["Dear Ana,"]]))
    assert (await read(ctx, path="letter.docx")).startswith(
        "[letter.docx: PDF, 1 page]\n--- page 1 ---\nDear Ana,"
    )
    put(ctx, "logo.pdf", b"\x89PNG\r\n\x1a\n" + bytes(64))
    with pytest.raises(ToolError, match=r"logo.pdf is a PNG image, not a document .*view_image"):
        await read(ctx, path="logo.pdf")


async def test_output_is_cut_at_400_kb_and_offset_reads_on(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path)
    rows: list[list[str | int | float]] = [[f"row {n}", n, "x" * 30] for n in range(1, 12_001)]
    put(ctx, "big.xlsx", xlsx_bytes({"Data": rows}))
    expected = "--- sheet Data ---\n" + "".join(
        f"row {n}\t{n}\t{'x' * 30}\n" for n in range(1, 12_001)
    )
    first = (await read(ctx, path="big.xlsx")).split("\n", 1)[1]  # the text after the name
    body, note, _ = first.rsplit("\n", 2)
    assert len(body.encode()) == 400_000
    assert note.startswith("[output cut at 400 KB, in sheet 'Data', row ")
    assert note.endswith("; read on with offset=400000]")
    rest = (await read(ctx, path="big.xlsx", offset=400_000)).split("\n", 1)[1]
    assert body + rest == expected  # every row exactly once across the two reads
    past = await read(ctx, path="big.xlsx", offset=10**7)
    assert past.endswith(
        f"[offset 10000000 is past the end of the text ({len(expected)} characters)]\n"
    )


async def test_an_encrypted_pdf_needs_its_password_unless_it_is_empty(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path)
    put(ctx, "locked.pdf", encrypted_pdf(THREE_PAGES, "s3cret"))
    with pytest.raises(ToolError, match=r"^locked.pdf is an encrypted PDF that needs a password$"):
        await read(ctx, path="locked.pdf")
    put(ctx, "open.pdf", encrypted_pdf(THREE_PAGES, "", algorithm="AES-256"))
    assert "Revenue grew (a lot)" in await read(ctx, path="open.pdf")


async def test_an_encrypted_office_file_is_named_as_such(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path)
    ole = bytes.fromhex("D0CF11E0A1B11AE1") + bytes(504) + "EncryptionInfo".encode("utf-16-le")
    put(ctx, "budget.xlsx", ole + bytes(1024))
    with pytest.raises(ToolError, match=r"budget.xlsx is a password-protected Office document"):
        await read(ctx, path="budget.xlsx")
    put(ctx, "old.doc", bytes.fromhex("D0CF11E0A1B11AE1") + bytes(2048))
    with pytest.raises(ToolError, match=r"old.doc is a legacy binary Office file"):
        await read(ctx, path="old.doc")


async def test_truncated_files_are_one_clear_error(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path)
    data = docx_bytes(["Some text that goes on."] * 50)
    put(ctx, "cut.docx", data[: len(data) // 2])
    with pytest.raises(ToolError, match=r"^cut.docx is a broken zip file"):
        await read(ctx, path="cut.docx")
    pdf = pdf_bytes(THREE_PAGES)
    put(ctx, "cut.pdf", pdf[:30])
    with pytest.raises(ToolError, match=r"^cut.pdf is a broken PDF"):
        await read(ctx, path="cut.pdf")


async def test_a_part_declaring_entities_is_refused(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path)
    laughs = (
        f'{XML}<!DOCTYPE d [<!ENTITY a "ha"><!ENTITY b "&a;&a;&a;&a;">]>'
        f'<w:document xmlns:w="{W}"><w:body><w:p><w:r><w:t>&b;</w:t></w:r></w:p></w:body>'
        "</w:document>"
    )
    data = package(
        {"word/document.xml": laughs},
        {"word/document.xml": f"{OD}.wordprocessingml.document.main+xml"},
    )
    put(ctx, "laughs.docx", data)
    with pytest.raises(ToolError, match=r"part word/document.xml declares a DTD or entities"):
        await read(ctx, path="laughs.docx")
    wide = package(
        {"word/document.xml": laughs.replace("UTF-8", "UTF-16").encode("utf-16")},
        {"word/document.xml": f"{OD}.wordprocessingml.document.main+xml"},
    )
    put(ctx, "wide.docx", wide)
    with pytest.raises(ToolError, match=r"declares a DTD or entities"):
        await read(ctx, path="wide.docx")
    ebcdic = package(
        {"word/document.xml": b'<?xml version="1.0" encoding="cp500"?>' + b"\x4c"},
        {"word/document.xml": f"{OD}.wordprocessingml.document.main+xml"},
    )
    put(ctx, "ebcdic.docx", ebcdic)
    with pytest.raises(ToolError, match=r"in encoding 'cp500'; refused"):
        await read(ctx, path="ebcdic.docx")


# -- zip bombs: sizes in headers are not trusted ---------------------------------------------


def _zeros_stream(prefix: bytes, megabytes: int) -> bytes:
    """A raw deflate stream of `prefix` then `megabytes` MB of "0" characters, built
    without holding them: after a full flush a block stands alone, so one compressed
    megabyte repeated inflates to as many megabytes."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = deflate.compress(prefix) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(b"0" * _MB) + deflate.flush(zlib.Z_FULL_FLUSH)
    return head + block * megabytes + deflate.flush()


def _raw_zip(members: list[tuple[str, bytes, int, int]]) -> bytes:
    """A zip of (name, deflated data, CRC, uncompressed size as the headers claim it)."""
    body = bytearray()
    directory = bytearray()
    for name, data, crc, size in members:
        offset = len(body)
        encoded = name.encode()
        body += struct.pack(
            "<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(data), size, len(encoded), 0
        )
        body += encoded + data
        directory += struct.pack(
            "<4s6H3L5H2L",
            *(b"PK\x01\x02", 20, 20, 0, 8, 0, 0, crc, len(data), size, len(encoded)),
            *(0, 0, 0, 0, 0, offset),
        )
        directory += encoded
    end = struct.pack(
        "<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members), len(directory), len(body), 0
    )
    return bytes(body + directory + end)


def _deflated(text: str) -> tuple[bytes, int]:
    data = text.encode()
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    return deflate.compress(data) + deflate.flush(), zlib.crc32(data)


async def test_a_member_whose_header_lies_about_its_size_is_measured_and_refused(
    tmp_path: Path,
) -> None:
    ctx = tool_context(tmp_path)
    types, types_crc = _deflated(
        f'{XML}<Types xmlns="{CT}"><Override PartName="/word/document.xml" '
        f'ContentType="{OD}.wordprocessingml.document.main+xml"/></Types>'
    )
    bomb = _zeros_stream(f'{XML}<w:document xmlns:w="{W}"><w:body><w:p>'.encode(), 80)
    # The headers say 1 KB; the member inflates to 80 MB.
    data = _raw_zip(
        [
            ("[Content_Types].xml", types, types_crc, 300),
            ("word/document.xml", bomb, 0, 1024),
        ]
    )
    assert len(data) < 200_000
    put(ctx, "liar.docx", data)
    with pytest.raises(ToolError, match=r"^liar.docx unpacks to more than 64 MB \(a zip bomb"):
        await read(ctx, path="liar.docx")


async def test_an_honest_gigabyte_of_zeros_is_refused_at_the_cap(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path)
    prefix = f'{XML}<Types xmlns="{CT}">'.encode()
    bomb = _zeros_stream(prefix, 1024)
    # Honest sizes (the CRC is never reached: the read stops at the cap).
    data = _raw_zip([("[Content_Types].xml", bomb, 0, len(prefix) + 1024 * _MB)])
    assert len(data) < 2 * _MB
    put(ctx, "zeros.xlsx", data)
    with pytest.raises(ToolError, match=r"zeros.xlsx unpacks to more than 64 MB"):
        await read(ctx, path="zeros.xlsx")
    assert MAX_UNPACKED_BYTES == 64 * _MB


async def test_a_zip_that_is_no_office_document_is_refused(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path)
    archive = tmp_path / "photos.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("a.txt", "hello")
    put(ctx, "photos.docx", archive.read_bytes())
    with pytest.raises(ToolError, match=r"photos.docx is a zip archive, not a document"):
        await read(ctx, path="photos.docx")


async def test_a_bad_document_is_an_error_result_through_the_registry_never_a_failed_turn(
    tmp_path: Path,
) -> None:
    ctx = tool_context(tmp_path, mode="read-only")
    registry = ToolRegistry()
    registry.register(ReadDocument(), "media")
    put(ctx, "locked.pdf", encrypted_pdf(THREE_PAGES, "pw"))
    put(ctx, "fine.pdf", pdf_bytes(THREE_PAGES))
    allowed = {"read_document"}
    bad = await registry.call(
        ToolUseBlock("t1", "read_document", {"path": "locked.pdf"}), ctx, allowed
    )
    assert bad.is_error and bad.text == "locked.pdf is an encrypted PDF that needs a password"
    good = await registry.call(
        ToolUseBlock("t2", "read_document", {"path": "fine.pdf"}), ctx, allowed
    )
    assert not good.is_error and "Thanks for reading" in good.text
    missing = await registry.call(
        ToolUseBlock("t3", "read_document", {"path": "nope.pdf"}), ctx, allowed
    )
    assert missing.is_error and missing.text.endswith("nope.pdf: no such file")
