"""nodes_list and node_invoke: the agents' way to the paired devices (core toolset, when
a `nodes:` section is configured).

node_invoke gates itself in every permission mode: a command nodes.allow lists for the
node (or "*") runs; anything else asks the turn's approver (the reviewer, then a human),
and an unattended run is denied; read-only agents cannot use nodes. What a device
returns is outside content (the turn is tainted). Files that come back are saved under
nodes/<node>/ in the workspace; images among them are shown to the model, scaled as
view_image scales them. files.put with `from` sends a workspace file.
"""

from __future__ import annotations

import asyncio
import base64
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from habakkuk.engine.llm.types import ImageBlock
from habakkuk.engine.toolkit.approvals import ApprovalRequest
from habakkuk.engine.toolkit.permissions import Risk, inside
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolError, ToolOutput
from habakkuk.engine.toolkit.service_tool import ServiceTool

from .hub import DEFAULT_TIMEOUT, MAX_TIMEOUT, NodeHub, NodeUnavailable
from .wire import MAX_FILE_BYTES, NodeFile, NodeResult

if TYPE_CHECKING:
    from habakkuk.engine.device_config import NodesConfig

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class NodesList(ServiceTool[NodeHub]):
    """nodes_list: the paired devices, whether each is online and what it offers."""

    name = "nodes_list"
    description = (
        "List the paired device nodes (phones, laptops, browsers): whether each is online "
        "and the commands it offers (system.notify, screen.snapshot, clipboard.read, "
        "location.get, files.get, ...). Use node_invoke to run one."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    unavailable = "device nodes are not configured"
    taints = False

    def refuse(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        return "read-only agents cannot use nodes" if ctx.mode == "read-only" else None

    async def act(self, service: NodeHub, args: dict[str, Any], ctx: ToolContext) -> str:
        views = await service.nodes()
        if not views:
            return "No device is paired (habakkuk node pair makes a pairing code)."
        lines = []
        for view in views:
            state = "online" if view.online else "offline"
            offers = ", ".join(view.caps) or "nothing"
            lines.append(f"- {view.name} ({view.platform or 'unknown'}, {state}): {offers}")
        return "\n".join(lines)


class NodeInvoke(Tool):
    """node_invoke: run one command on a device."""

    name = "node_invoke"
    description = (
        "Run a command on a paired device node and get its result: system.notify "
        "{title, body}, screen.snapshot, clipboard.read, clipboard.write {text}, "
        "location.get, camera.snap, system.run {command}, files.get {path}, files.put "
        "{path, from (a workspace file) or text}. Commands not allowed for the node ask "
        "the user first. Files that come back are saved under nodes/<node>/ in the "
        "workspace; images are shown to you."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "node": {"type": "string", "description": "the node's name (see nodes_list)"},
            "command": {"type": "string", "description": "e.g. system.notify"},
            "args": {"type": "object", "description": "the command's arguments"},
            "timeout_seconds": {"type": "number", "minimum": 1, "maximum": MAX_TIMEOUT},
        },
        "required": ["node", "command"],
        "additionalProperties": False,
    }
    risk: ClassVar[Risk] = Risk.READ  # gated by run itself, in every mode (see the module)
    taints = True  # what a device returns is outside content
    # A call names its job by turn and call id (relay.py): a resumed turn awaits the job
    # its first run queued, and the device is not told twice.
    resumable: ClassVar[bool] = True

    def __init__(self, hub: NodeHub | None, config: NodesConfig | None) -> None:
        self.hub, self.config = hub, config

    def title(self, args: dict[str, Any]) -> str:
        return f"{args.get('node', '?')}: {args.get('command', '?')}"[:200]

    def refuse(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        return "read-only agents cannot use nodes" if ctx.mode == "read-only" else None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        if self.hub is None or self.config is None:
            raise ToolError("node_invoke: device nodes are not configured")
        node, command = str(args["node"]), str(args["command"])
        call_args = dict(args.get("args") or {})
        if not self.config.allows(node, command):
            denied = await self._ask(args, ctx)
            if denied is not None:
                return ToolOutput(denied, is_error=True, denied=True)
        if command == "files.put" and "from" in call_args:
            call_args = await asyncio.to_thread(_with_file, call_args, ctx)
        timeout = float(args.get("timeout_seconds") or DEFAULT_TIMEOUT)
        try:
            call = (ctx.turn, ctx.call_id) if ctx.turn and ctx.call_id else None
            result = await self.hub.invoke(node, command, call_args, timeout, call)
        except NodeUnavailable as exc:
            raise ToolError(f"node_invoke: {exc}") from None
        return await _output(node, command, result, ctx)

    async def _ask(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        """None when the approver allows the call; else why it is denied."""
        if ctx.approver is None:
            return (
                f"denied: {args['command']} is not in nodes.allow for {args['node']}, and "
                "nobody can approve in an unattended run"
            )
        request = ApprovalRequest(
            agent=ctx.agent,
            session=ctx.session,
            turn=ctx.turn,
            tool=self.name,
            input=args,
            summary=f"run {args['command']} on device {args['node']}",
            call_id=ctx.call_id,
        )
        decision = await ctx.approver.approve(request)
        if decision.allowed:
            return None
        why = f": {decision.reason}" if decision.reason else ""
        return f"denied by {decision.by}{why}"


def _with_file(call_args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """files.put's `from` (a workspace file) as the name and base64 data the device takes."""
    source = ctx.resolve(str(call_args.pop("from"))).resolve()
    if not inside(source, ctx.workspace.resolve()):
        raise ToolError(f"node_invoke: files.put from {source} is outside the workspace")
    try:
        if source.stat().st_size > MAX_FILE_BYTES:
            raise ToolError(f"node_invoke: {source} is over 25 MB")
        data = source.read_bytes()
    except FileNotFoundError:
        raise ToolError(f"node_invoke: {source}: no such file") from None
    call_args.setdefault("path", source.name)
    call_args["data"] = base64.b64encode(data).decode("ascii")
    return call_args


def _save(node: str, item: NodeFile, ctx: ToolContext) -> Path:
    """Write a returned file under nodes/<node>/ in the workspace (a new name if taken)."""
    folder = ctx.workspace / "nodes" / (_UNSAFE.sub("_", node) or "node")
    folder.mkdir(parents=True, exist_ok=True)
    base = _UNSAFE.sub("_", Path(item.name).name).strip("._") or "file"
    stem, suffix = Path(base).stem, Path(base).suffix
    target, n = folder / base, 1
    while target.exists():
        n += 1
        target = folder / f"{stem}-{n}{suffix}"
    target.write_bytes(item.data)
    return target


async def _output(node: str, command: str, result: NodeResult, ctx: ToolContext) -> ToolOutput:
    from habakkuk.tools.images import ImageError, prepare, sniff

    if result.error:
        return ToolOutput(f"{node}: {command} failed: {result.error}", is_error=True)
    lines = [result.text] if result.text else []
    media: list[ImageBlock] = []
    for item in result.files:
        path = await asyncio.to_thread(_save, node, item, ctx)
        shown = path.relative_to(ctx.workspace)
        if sniff(item.data) is None:
            lines.append(f"saved {shown} ({len(item.data):,} bytes)")
            continue
        try:
            image = await asyncio.to_thread(prepare, item.data, str(shown))
        except ImageError as exc:
            lines.append(f"saved {shown}; not shown: {exc}")
            continue
        blob = await ctx.blobs.put(image.data, image.suffix)
        media.append(ImageBlock(image.media_type, blob=str(blob), name=path.name))
        lines.append(f"saved {shown}: {image.describe()}; shown below")
    return ToolOutput("\n".join(lines) or f"{node}: {command} done", media=media)


def node_tools(hub: NodeHub | None, config: NodesConfig | None) -> list[Tool]:
    """The node tools on `hub`."""
    return [NodesList(hub), NodeInvoke(hub, config)]
