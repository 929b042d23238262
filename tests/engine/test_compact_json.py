"""The queue's JSON (engine/compact_json.py) says what the json module says."""

from __future__ import annotations

import json
from typing import Any

import pytest

from habakkuk.engine import compact_json

VALUES: list[Any] = [
    {},
    {"i": 5, "ok": True, "none": None},
    {"text": "naïve — 日本", "nested": {"list": [1, 2.5, -0.0, 1e300, "x"]}},
    [1, [2, [3, {"a": "b"}]]],
    "a string",
    3.141592653589793,
    float("nan"),
    float("inf"),
]


@pytest.mark.parametrize("value", VALUES)
def test_dumps_writes_what_json_dumps_writes(value: Any) -> None:
    assert compact_json.dumps(value) == json.dumps(value, separators=(",", ":"))


def test_dumps_refuses_what_json_refuses() -> None:
    circular: dict[str, Any] = {}
    circular["self"] = circular
    with pytest.raises(ValueError, match="Circular reference"):
        compact_json.dumps(circular)
    with pytest.raises(TypeError, match="not JSON serializable"):
        compact_json.dumps({"when": object()})
    # A value that failed half way leaves nothing behind for the next one.
    shared = {"x": 1}
    with pytest.raises(TypeError):
        compact_json.dumps([shared, object()])
    assert compact_json.dumps([shared, shared]) == '[{"x":1},{"x":1}]'


@pytest.mark.parametrize(
    "text", ['{"i":5}', ' {"i": 5} ', '[1,"2",null]', '"s"', "1.5", "\n{}\n", "true"]
)
def test_loads_reads_what_json_loads_reads(text: str) -> None:
    assert compact_json.loads(text) == json.loads(text)


@pytest.mark.parametrize("text", ["", "   ", "{", '{"a":1} trailing', "{'a': 1}", "[1,]"])
def test_loads_fails_as_json_loads_fails(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as ours:
        compact_json.loads(text)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert (ours.value.msg, ours.value.pos) == (theirs.value.msg, theirs.value.pos)
