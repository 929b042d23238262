"""What the model gets of a file that came with a chat message: the one rule for every
surface (the channels' gateway, the web chat's uploads and the terminal's dropped files).

Images (told by their bytes, prepared as view_image prepares them) and PDFs go to the
model as content blocks by blob reference, which every adapter sends in its own wire
shape. A document the model cannot take as it
is (DOCX, XLSX, PPTX, HTML, plain text) is read by read_document's reader and its
text, cut at INLINE_TEXT_BYTES, goes in a context block of the user message; the note
says that read_document on the saved inbox copy reads the rest. A document that
cannot be read (encrypted, broken) gets a note saying why in the message instead.
Audio, video and other binaries get nothing here (the gateway transcribes voice).
"""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass, field
from pathlib import Path

from habakkuk.engine.llm.types import Block, ContextBlock, DocumentBlock, ImageBlock
from habakkuk.engine.store import BlobStore

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
# Enough of a document for the model to answer about it at once; the rest is a
# read_document call away (a 400 KB extraction in every message would crowd the context).
INLINE_TEXT_BYTES = 100_000
# The ContextBlock kind of a document's extracted text (not the user's own words:
# titles, search and exports leave it out).
ATTACHMENT_KIND = "attachment"
# The largest file a message may bring, on every surface, and the note in its place.
MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024
TOO_LARGE = "[attachment {name} was too large to download]"


@dataclass(frozen=True)
class ForModel:
    """What one attachment adds to the user message: blocks, and a note for its text."""

    blocks: list[Block] = field(default_factory=list)
    note: str = ""


async def for_model(
    blobs: BlobStore, data: bytes, media_type: str, name: str, saved: str
) -> ForModel:
    """The blocks (or the note) an attachment gives the model.

    `name` names the blocks; `saved` is where the copy is, relative to the agent's
    workspace (inbox/...), so the model can read on with read_document.
    """
    from habakkuk.tools.documents.sniff import HEAD_BYTES, sniff_bytes
    from habakkuk.tools.images import ImageError, prepare, sniff

    media = media_type.split(";")[0].strip().lower()
    suffix = Path(name).suffix
    if sniff(data) is not None:
        # Told by its bytes, as view_image tells them, and held to the same limits (a
        # bomb or a corrupt file is a note; a large one goes as a 1568 px JPEG).
        try:
            image = await asyncio.to_thread(prepare, data, saved)
        except ImageError as exc:
            return ForModel(note=f"[attachment {saved} not shown: {exc}]")
        blob = await blobs.put(image.data, image.suffix)
        return ForModel([ImageBlock(image.media_type, blob=str(blob), name=name)])
    if media in IMAGE_TYPES:
        return ForModel(
            note=f"[attachment {saved} not shown: it says {media}, but it is not an image]"
        )
    kind = sniff_bytes(data[:HEAD_BYTES])
    if kind == "pdf":
        blob = await blobs.put(data, suffix)
        return ForModel([DocumentBlock(name, "application/pdf", blob=str(blob))])
    if kind not in ("zip", "ole", "html", "text") or media.startswith(("audio/", "video/")):
        return ForModel()
    return await asyncio.to_thread(_extracted, data, saved)


def _extracted(data: bytes, saved: str) -> ForModel:
    """The document's text as a context block, or the note of why it could not be read."""
    from habakkuk.tools.documents.errors import DocumentError, NotADocument
    from habakkuk.tools.documents.reader import read_document

    try:
        document = read_document(io.BytesIO(data), saved, limit=INLINE_TEXT_BYTES)
    except NotADocument:
        return ForModel()  # a zip of other files, say: the inbox note is all it needs
    except DocumentError as exc:
        return ForModel(note=f"[attachment {saved} could not be read: {exc}]")
    lines = [f"[attached file {saved} ({document.summary}); its text:]", document.text.rstrip()]
    if document.note:
        lines.append(f"{document.note} (with read_document on {saved})")
    return ForModel([ContextBlock("\n".join(lines), ATTACHMENT_KIND)])
