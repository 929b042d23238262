"""apply_patch: many file changes at once, from a unified diff or a *** Begin Patch block.

The engine (habakkuk.tools.patching) applies every hunk in memory before it
writes anything. This tool adds the policy side: `paths()` names every file
the patch touches (move targets included), so workspace mode runs it without
asking only when all of them are inside the workspace; a patch that cannot
even be parsed is refused before anyone is asked to approve it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolError, ToolOutput
from habakkuk.tools.safe_open import confinement


class ApplyPatch(Tool):
    """The apply_patch tool."""

    name = "apply_patch"
    description = (
        "Change several files at once with a patch: a unified diff (as git diff prints it) or "
        "the *** Begin Patch format (*** Add File: / *** Update File: [*** Move to:] / "
        "*** Delete File:, hunks of ' ', '-' and '+' lines under optional '@@ <line the hunk "
        "follows>' headers, *** End Patch). Hunks are found by their text, not line numbers; "
        "include a few unchanged context lines. Nothing is written unless every hunk applies."
    )
    input_schema = {
        "type": "object",
        "properties": {"patch": {"type": "string", "description": "The patch text"}},
        "required": ["patch"],
        "additionalProperties": False,
    }
    risk = Risk.WRITE
    writes_files = True
    reads_files = True

    def refuse(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        from habakkuk.tools.patching import PatchError, patch_paths  # the parser: on first use

        try:
            patch_paths(args["patch"])
        except PatchError as exc:
            return f"apply_patch: {exc}"
        return None

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        from habakkuk.tools.patching import PatchError, patch_paths

        try:
            names = patch_paths(args["patch"])
        except PatchError:
            # refuse() already turned this call away; an empty list is never consulted.
            return []
        return [ctx.resolve(name) for name in names]

    def title(self, args: dict[str, Any]) -> str:
        from habakkuk.tools.patching import PatchError, patch_paths

        try:
            names = patch_paths(args.get("patch", ""))
        except PatchError:
            return "apply_patch (malformed patch)"
        shown = ", ".join(names[:5])
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        return f"patch {shown}{more}"[:200]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        from habakkuk.tools.patching import PatchError, apply_patch

        try:
            result = await asyncio.to_thread(
                apply_patch, args["patch"], ctx.resolve, confine=confinement(ctx)
            )
        except PatchError as exc:
            raise ToolError(f"apply_patch: {exc}") from None
        if not result.summary:
            return ToolOutput("patch applied")
        return ToolOutput(f"patch applied:\n{result.summary}")
