"""MCP tools as registry tools: the server's name, description and schema; risk from config."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolOutput

from .results import McpResult
from .shown import tool_output

if TYPE_CHECKING:
    from habakkuk.engine.config import McpServerConfig


class ServerLink(Protocol):
    """What a tool uses of its server's link (manager.ServerLink), so tools.py needs no manager."""

    config: McpServerConfig

    async def call(self, tool: str, args: dict[str, Any]) -> McpResult:
        """Call `tool` on the server; ToolError (model-readable) when it cannot."""
        ...


EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class McpTool(Tool):
    """One tool of one MCP server. The model sees `mcp__<server>__<tool>`."""

    def __init__(
        self,
        link: ServerLink,
        real_name: str,
        name: str,
        description: str,
        input_schema: dict[str, Any] | None,
    ):
        config = link.config
        # Tool keeps these as class attributes for built-ins; each MCP tool has its own.
        self.__dict__.update(
            name=name,
            description=description or f"{real_name} (from MCP server {config.name})",
            input_schema=_schema(input_schema),
            risk=Risk(config.risk),
            # Spec 004: a server's network risk (the default) runs without asking
            # in workspace mode; `approve` tools still count as exec.
            network_in_workspace=True,
            # What a server returns is outside content, whatever risk it is given.
            taints=True,
        )
        self.link = link
        self.real_name = real_name

    def risk_for(self, args: dict[str, Any], ctx: ToolContext) -> Risk:
        """Tools listed in `approve` count as exec: they always ask below full mode."""
        if self.real_name in self.link.config.approve:
            return Risk.EXEC
        return self.risk

    def title(self, args: dict[str, Any]) -> str:
        text = json.dumps(args, ensure_ascii=False)
        return f"{self.link.config.name}.{self.real_name} {text}"[:200]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        result = await self.link.call(self.real_name, args)
        return await tool_output(result, ctx, self.link.config.name, self.real_name)


def _schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return dict(EMPTY_SCHEMA)
    return schema
