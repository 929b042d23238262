"""output_schema: the schema check, where an answer's final JSON is, and what mismatches say."""

from __future__ import annotations

from typing import Any

import pytest

from habakkuk.engine.errors import HabakkukError
from habakkuk.work.output_schema import check_schema, final_json, problems


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": 1}', {"a": 1}),
        ("  [1, 2]  ", [1, 2]),
        ('First ```json\n{"a": 1}\n``` then ```\n{"a": 2}\n``` done.', {"a": 2}),
        ('Here it is: {"a": {"b": [1]}}', {"a": {"b": [1]}}),
        ('Not this {"x": 1} but this [3]', [3]),
        ("42", 42),
    ],
)
def test_the_final_json_is_the_whole_answer_else_the_last_fence_else_the_trailing_value(
    text: str, value: Any
) -> None:
    assert final_json(text) == (True, value)


def test_an_answer_without_trailing_json_has_none() -> None:
    assert final_json('{"a": 1} and then words')[0] is False
    assert problems({"type": "object"}, "no json")[1] == [
        "the answer does not end with a JSON value"
    ]


def test_a_schema_using_refs_combinators_and_bounds_validates() -> None:
    schema = {
        "$defs": {"name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5}},
        "type": "object",
        "properties": {
            "names": {"type": "array", "items": {"$ref": "#/$defs/name"}, "minItems": 1},
            "pair": {"prefixItems": [{"const": "x"}, {"enum": [1, 2]}]},
            "n": {"oneOf": [{"type": "integer", "maximum": 3}, {"not": {"type": "number"}}]},
        },
        "required": ["names"],
        "additionalProperties": False,
    }
    check_schema(schema)
    assert problems(schema, '{"names": ["ab"], "pair": ["x", 2], "n": 1}')[1] == []
    _, errors = problems(schema, '{"names": ["ABC"], "pair": ["y", 3], "n": 9, "z": 0}')
    assert len(errors) == 5
    assert any(e.startswith("names/0:") for e in errors)
    assert any("'z' was unexpected" in e for e in errors)


def test_a_bad_schema_names_where_it_is_wrong() -> None:
    with pytest.raises(HabakkukError, match="properties/a"):
        check_schema({"type": "object", "properties": {"a": {"type": 5}}})
    with pytest.raises(HabakkukError, match="must be a JSON object"):
        check_schema(["not", "a", "schema"])
