"""The one script every step evaluates in the meeting's page, with an operation: probe
(what the page shows), find (the middle of the visible control a pattern names, for a
real mouse click), focus (a text field a pattern names), observe (install the captions'
MutationObserver, reporting through the binding BINDING)."""

from __future__ import annotations

import json
from pathlib import Path

from .patterns import Platform

BINDING = "__habakkukCaptions"

# The script itself is page.js beside this module (read once, at import).
_SCRIPT = (Path(__file__).parent / "page.js").read_text(encoding="utf-8")


def call(platform: Platform, op: str, arg: str = "") -> str:
    """The expression that runs operation `op` (with `arg`) for `platform`'s page."""
    cfg = {
        "captions": platform.captions_region,
        "chat": platform.chat_region,
        "block": platform.caption_block,
        "binding": BINDING,
    }
    return f"{_SCRIPT.strip()}({json.dumps(op)}, {json.dumps(arg)}, {json.dumps(cfg)})"
