"""JSON for the job queue's hot path: what json.dumps and json.loads do, minus their
per-call Python layers.

The queue encodes a payload and a result and decodes a payload on every cycle of
enqueue, claim and complete, and those layers cost more than the C code under them:
`JSONEncoder.encode` goes through `iterencode`, which builds a C encoder on each call,
and `json.loads` matches a regular expression of whitespace before and after the value.
Measured on the queue's own values: about 0.9 us here for 2 us, and 0.5 us for 1.5 us.

Same output and same errors as the json module: `dumps` builds the C encoder with a
fresh circular-reference table per call (a shared one would be left dirty by a value
that fails half way); `loads` falls back to `json.loads` for anything but a document
that is one JSON value with nothing around it (whitespace, garbage, an empty string), so
a bad stored value raises what it always did.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder as _encoder
from json import scanner as _scanner
from typing import Any

# The C accelerators; None in a Python built without them (then the json module's own
# functions, which are what these stand for).
_make_encoder: Callable[..., Any] | None = getattr(_encoder, "c_make_encoder", None)
_make_scanner: Callable[..., Any] | None = getattr(_scanner, "c_make_scanner", None)

_default = json.JSONEncoder().default  # TypeError for what JSON cannot hold
_escape = _encoder.encode_basestring_ascii  # ensure_ascii, as json.dumps by default
_reference = json.JSONEncoder(separators=(",", ":")).encode


def dumps(value: Any) -> str:
    """`json.dumps(value, separators=(",", ":"))`."""
    if _make_encoder is None:
        return _reference(value)
    chunks = _make_encoder({}, _default, _escape, None, ":", ",", False, False, True)(value, 0)
    return "".join(chunks)


_scan = _make_scanner(json.JSONDecoder()) if _make_scanner is not None else None


def loads(text: str) -> Any:
    """`json.loads(text)` for a str."""
    if _scan is not None:
        try:
            value, end = _scan(text, 0)
        except (StopIteration, ValueError, TypeError):
            pass  # not one whole value (or bytes): json.loads says what is wrong
        else:
            if end == len(text):
                return value
    return json.loads(text)
