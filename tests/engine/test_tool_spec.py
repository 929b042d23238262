"""What a tool tells the model: built once per tool, built again when it changes."""

from __future__ import annotations

from typing import Any

from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolOutput


class Roster(Tool):
    """A tool that words its description from the current state (as some do)."""

    name = "roster"
    input_schema = {"type": "object", "properties": {}}
    risk = Risk.READ

    def __init__(self) -> None:
        self.agents = ["main"]

    @property
    def description(self) -> str:  # type: ignore[override]  # Tool's is a ClassVar, read alike
        return "agents: " + ", ".join(self.agents)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput("ok")


def test_a_tool_spec_is_built_once_and_reused_while_the_tool_is_unchanged() -> None:
    tool = Roster()
    first = tool.spec()
    assert (first.name, first.description, first.input_schema) == (
        "roster",
        "agents: main",
        Roster.input_schema,
    )
    assert tool.spec() is first


def test_a_tool_whose_description_changes_tells_the_model_the_new_one() -> None:
    tool = Roster()
    tool.spec()
    tool.agents.append("helper")
    assert tool.spec().description == "agents: main, helper"


def test_a_tool_whose_schema_object_changes_tells_the_model_the_new_schema() -> None:
    tool = Roster()
    tool.spec()
    tool.input_schema = {"type": "object", "properties": {"who": {"type": "string"}}}  # type: ignore[misc]  # an instance may replace the class's schema
    assert tool.spec().input_schema == {
        "type": "object",
        "properties": {"who": {"type": "string"}},
    }
