"""PDF: the text of each page, with pypdf (a maintained pure-Python parser).

An encrypted PDF is tried with the empty password (many are encrypted only to set
permissions); one that needs a real password is an error. pypdf bounds what its
filters inflate; whatever else a hostile or damaged file makes it raise is reported
as a broken PDF, never a failed turn.
"""

from __future__ import annotations

import contextlib
import logging
from typing import IO

from .errors import DocumentError
from .output import Full, Sink
from .ranges import Ranges


def read_pdf(handle: IO[bytes], name: str, sink: Sink, pages: Ranges | None) -> str:
    """Add the selected pages' text to `sink` ("--- page N ---" before each), until it is
    full; returns the summary ("PDF, 12 pages")."""
    from pypdf import PdfReader
    from pypdf.errors import DependencyError

    # pypdf logs every oddity it recovers from; a damaged file would flood the log.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(handle)
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentError(f"{name} is an encrypted PDF that needs a password")
        count = len(reader.pages)
    except DependencyError as exc:
        raise DocumentError(f"{name} is an encrypted PDF pypdf cannot open here ({exc})") from None
    except DocumentError:
        raise
    except Exception as exc:  # a hostile file can make a parser raise anything
        raise DocumentError(f"{name} is a broken PDF ({_why(exc)})") from None
    chosen = pages.pick(count, "pages", name) if pages is not None else range(1, count + 1)
    with contextlib.suppress(Full):  # the sink is full: the note says where it was cut
        for number in chosen:
            sink.where = f"page {number}"
            try:
                text = reader.pages[number - 1].extract_text()
            except Exception as exc:  # one bad page says so; the others are still read
                text = f"[page {number} could not be read: {_why(exc)}]"
            text = text.strip() or "[no text on this page: a scan or a picture?]"
            sink.add(f"--- page {number} ---\n{text}\n")
    return f"PDF, {count} page{'s' if count != 1 else ''}"


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:200] if text else type(exc).__name__
