"""HTML as its readable text (the reduction fetch_url uses, tools/html_text.py)."""

from __future__ import annotations

import contextlib
from typing import IO

from .output import Full, Sink
from .sniff import HEAD_BYTES, text_encoding

# A page's text is a fraction of its markup; past this much markup the output budget is
# long spent, so the rest is not read (and the note says the page was cut).
MAX_HTML_BYTES = 16 * 1024 * 1024


def read_html(handle: IO[bytes], sink: Sink) -> str:
    """Add the page's title and text to `sink` until it is full; returns "HTML"."""
    from habakkuk.tools.html_text import html_to_text

    raw = handle.read(MAX_HTML_BYTES + 1)
    cut = len(raw) > MAX_HTML_BYTES
    page = raw[:MAX_HTML_BYTES].decode(text_encoding(raw[:HEAD_BYTES]), errors="replace")
    title, text = html_to_text(page)
    sink.where = "the page"
    with contextlib.suppress(Full):  # the sink is full: the note says where it was cut
        if title:
            sink.add(f"# {title}\n\n")
        sink.add(text + "\n")
        if cut:
            megabytes = MAX_HTML_BYTES // (1024 * 1024)
            sink.add(f"[the page is longer than {megabytes} MB; the rest was not read]\n")
    return "HTML"
