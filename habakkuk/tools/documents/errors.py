"""The one error a document read ends with: a line that names the file and why."""

from __future__ import annotations

from habakkuk.engine.toolkit.registry import ToolError


class DocumentError(ToolError):
    """The file cannot be read as a document (encrypted, broken, a zip bomb, not a
    document): the tool's error result, or a chat attachment's note."""


class NotADocument(DocumentError):
    """The file is of no format read_document reads (an image, a zip of other files...)."""
