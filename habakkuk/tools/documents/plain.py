"""Plain text passes through, decoded as UTF-8 (or as its byte-order mark says)."""

from __future__ import annotations

import codecs
import contextlib
from typing import IO

from .output import Full, Sink
from .sniff import HEAD_BYTES, text_encoding

_CHUNK = 64 * 1024


def read_text(handle: IO[bytes], sink: Sink) -> str:
    """Add the file's text to `sink`, streamed (a cut stops the reading); returns "text"."""
    head = handle.read(HEAD_BYTES)
    decoder = codecs.getincrementaldecoder(text_encoding(head))(errors="replace")
    sink.where = "the text"
    chunk = head
    with contextlib.suppress(Full):  # the sink is full: the note says where it was cut
        while chunk:
            sink.add(decoder.decode(chunk))
            chunk = handle.read(_CHUNK)
        sink.add(decoder.decode(b"", final=True))
    return "text"
