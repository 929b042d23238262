"""search_files: regular-expression search of file contents (the engine is file_search)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from habakkuk.engine.toolkit.home_files import HomeFile, home_file
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolError, ToolOutput
from habakkuk.tools.file_search import (
    DEFAULT_MAX_RESULTS,
    MAX_RESULTS_CAP,
    SearchError,
    SearchResult,
    search_files,
)


class SearchFiles(Tool):
    """The search_files tool."""

    name = "search_files"
    description = (
        "Search file contents by regex (ripgrep); returns path:line: text. Skips"
        " .gitignore'd, hidden and binary files. path: a folder or file (default the"
        " workspace); glob filters names ('*.py'); files_only lists files."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string"},
            "path": {"type": "string"},
            "glob": {"type": "string"},
            "ignore_case": {"type": "boolean"},
            "files_only": {"type": "boolean"},
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RESULTS_CAP,
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    risk = Risk.READ
    reads_files = True

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.get("path", "."))]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        target = ctx.resolve(args.get("path", "."))
        try:
            result = await search_files(
                args["pattern"],
                ctx.workspace,
                path=target,
                glob=args.get("glob"),
                ignore_case=bool(args.get("ignore_case", False)),
                files_only=bool(args.get("files_only", False)),
                max_results=int(args.get("max_results", DEFAULT_MAX_RESULTS)),
            )
        except SearchError as exc:
            raise ToolError(f"search_files: {exc}") from None
        if ctx.mode != "full":
            result = _without_credentials(result, ctx)
        return ToolOutput(result.render())


def _without_credentials(result: SearchResult, ctx: ToolContext) -> SearchResult:
    """Drop what the search found in the home's credential files (a workspace holding
    the home would show their lines); they are for full mode only."""

    def secret(rel: str) -> bool:
        kind = home_file(ctx.workspace / rel, ctx.home, workspace=ctx.workspace, agent=ctx.agent)
        return kind is HomeFile.CREDENTIAL

    result.matches = [m for m in result.matches if not secret(m.path)]
    result.files = [f for f in result.files if not secret(f)]
    return result
