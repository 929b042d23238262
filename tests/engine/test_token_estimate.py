"""The prompt estimate that drives compaction: specs measured once per schema, scripts apart."""

from __future__ import annotations

import json

from habakkuk.engine.agent.compaction import estimate_text_tokens, spec_tokens
from habakkuk.engine.llm.types import ToolSpec


def test_ascii_and_cjk_text_are_estimated_at_their_own_rates() -> None:
    assert estimate_text_tokens("a" * 400) == 100
    assert estimate_text_tokens("漢" * 150) == 100
    assert estimate_text_tokens("é" * 400) == 100  # latin beyond ASCII: still ~4 a token


def test_a_spec_is_measured_by_its_content_and_a_new_schema_is_measured_again() -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    first = ToolSpec("read_thing", "Reads a thing.", schema)
    expected = estimate_text_tokens("read_thing" + "Reads a thing." + json.dumps(schema))
    assert spec_tokens(first) == expected
    assert spec_tokens(ToolSpec("read_thing", "Reads a thing.", schema)) == expected
    bigger = {**schema, "description": "x" * 4000}
    # Same name and description, another schema object: not the cached figure.
    assert spec_tokens(ToolSpec("read_thing", "Reads a thing.", bigger)) >= expected + 1000
