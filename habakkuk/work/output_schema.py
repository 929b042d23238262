"""A sub-turn's output_schema (spec 000 "Delegation"): check the schema, tell the child what
to end with, find the final JSON of its answer and validate it.

The final JSON is the whole answer when it parses, else the last fenced block that parses,
else the outermost JSON value that runs to the end of the answer. Validation is Draft 2020-12
(type, enum, const, properties, required, additionalProperties, items, prefixItems, lengths,
pattern, numeric bounds, allOf/anyOf/oneOf/not, local $ref). jsonschema is imported when a
schema is used, never at start-up.
"""

from __future__ import annotations

import json
import re
from typing import Any

from habakkuk.engine.errors import HabakkukError

CORRECTION_KIND = "output_schema"  # the ContextBlock kind of the one correction message
MAX_ERRORS = 10
_FENCE = re.compile(r"```[\w-]*[ \t]*\n(.*?)\n?```", re.DOTALL)


def check_schema(schema: object) -> dict[str, Any]:
    """The schema when it is a valid Draft 2020-12 schema; HabakkukError naming what is wrong."""
    if not isinstance(schema, dict):
        raise HabakkukError("output_schema must be a JSON object (a JSON Schema)")
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the root"
        raise HabakkukError(
            f"output_schema is not a valid JSON Schema at {where}: {exc.message}"
        ) from None
    return schema


def instructions(schema: dict[str, Any]) -> str:
    """What the child's task text adds so it ends with a matching JSON value."""
    return (
        "\n\nEnd your final answer with a single JSON value that matches this JSON Schema "
        "(a fenced ```json block is fine); the caller reads only that JSON:\n"
        + json.dumps(schema, indent=2, ensure_ascii=False)
    )


def final_json(text: str) -> tuple[bool, Any]:
    """(found, value): the answer's final JSON value as the module docstring describes."""
    stripped = text.strip()
    if not stripped:
        return False, None
    try:
        return True, json.loads(stripped)
    except ValueError:
        pass
    for block in reversed(_FENCE.findall(stripped)):
        try:
            return True, json.loads(block)
        except ValueError:
            continue
    return _trailing_value(stripped)


def _trailing_value(text: str) -> tuple[bool, Any]:
    """The outermost JSON value that ends where `text` ends (its earliest possible start)."""
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char not in "{[":
            continue
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if end == len(text):
            return True, value
    return False, None


def problems(schema: dict[str, Any], text: str) -> tuple[Any, list[str]]:
    """(value, errors): the answer's final JSON and why it does not match ([] when it does)."""
    found, value = final_json(text)
    if not found:
        return None, ["the answer does not end with a JSON value"]
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    lines = []
    for error in errors[:MAX_ERRORS]:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        lines.append(f"{where}: {error.message}")
    if len(errors) > MAX_ERRORS:
        lines.append(f"... and {len(errors) - MAX_ERRORS} more")
    return value, lines


def correction(errors: list[str]) -> str:
    """The one user message a mismatch appends to the child's transcript."""
    listed = "\n".join(f"- {e}" for e in errors)
    return (
        "Your answer's final JSON does not match the required output_schema:\n"
        f"{listed}\nReply again, ending with a JSON value that matches the schema."
    )


class SchemaCheck:
    """The TurnRunner's OutputCheck for sub-turns with an output_schema."""

    def problems(self, schema: dict[str, Any], text: str) -> tuple[Any, list[str]]:
        return problems(schema, text)

    def correction(self, errors: list[str]) -> str:
        return correction(errors)
