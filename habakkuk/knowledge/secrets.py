"""The memory's secret check: text that looks like a credential is never stored.

The detector is engine/secret_scan.py (one for the memory, the skills and the logs);
these are its names as the knowledge layer has always imported them.
"""

from __future__ import annotations

from habakkuk.engine.secret_scan import (
    Finding,
    find_secret,
    find_secrets,
    luhn_valid,
)
from habakkuk.engine.secret_shapes import looks_random, shannon_entropy

__all__ = [
    "Finding",
    "find_secret",
    "find_secrets",
    "looks_random",
    "luhn_valid",
    "shannon_entropy",
]
