"""Database URLs as people may see them: never with their password."""

from __future__ import annotations

import re

_PASSWORD = re.compile(r"(://[^:/@]+:)[^@]*@")


def redact(url: str) -> str:
    """`url` with its password replaced by `***`, for messages and logs."""
    return _PASSWORD.sub(r"\1***@", url)
