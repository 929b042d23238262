"""todo: the session's task list, kept in state.db and shown to the model every turn.

While any item is open, the turn loop appends the list to the turn's user
message, so the model sees it without the transcript being rewritten.
"""

from __future__ import annotations

from typing import Any

from habakkuk.engine.state import (
    MAX_TODO_ITEMS,
    TODO_STATUSES,
    StateStore,
    TodoError,
    TodoItem,
    TodoStatus,
    render_todos,
)
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolError, ToolOutput

ACTIONS = ("add", "update", "complete", "list", "clear")


class Todo(Tool):
    """The todo tool."""

    name = "todo"
    description = (
        "Keep a task list for this conversation (at most "
        f"{MAX_TODO_ITEMS} items). actions: add (items: list of texts), update (number, text "
        "and/or status: pending|in_progress|done), complete (number), list, clear (all, or "
        "done_only). While any item is open the list is shown to you at the start of every "
        "turn."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "items": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_TODO_ITEMS},
            "number": {"type": "integer", "minimum": 1},
            "text": {"type": "string"},
            "status": {"type": "string", "enum": list(TODO_STATUSES)},
            "done_only": {"type": "boolean"},
        },
        "required": ["action"],
        "additionalProperties": False,
    }
    # Only the session's own list in Habakkuk's state changes: no file, no command.
    risk = Risk.READ

    def title(self, args: dict[str, Any]) -> str:
        return f"todo {args.get('action', '')}".strip()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        store = ctx.state
        if not isinstance(store, StateStore):
            raise ToolError("todo: the state store is not available in this run")
        action = args["action"]
        try:
            items = await self._act(store, ctx.session, action, args)
        except TodoError as exc:
            raise ToolError(f"todo: {exc}") from None
        return ToolOutput(_summary(items))

    async def _act(
        self, store: StateStore, session: str, action: str, args: dict[str, Any]
    ) -> list[TodoItem]:
        if action == "add":
            return await store.add_todos(session, list(args.get("items") or []))
        if action in ("update", "complete"):
            if "number" not in args:
                raise TodoError(f"{action} needs the item's number")
            status: TodoStatus | None = "done" if action == "complete" else args.get("status")
            return await store.update_todo(
                session, int(args["number"]), text=args.get("text"), status=status
            )
        if action == "clear":
            return await store.clear_todos(session, done_only=bool(args.get("done_only")))
        return await store.todos(session)


def _summary(items: list[TodoItem]) -> str:
    if not items:
        return "the todo list is empty"
    open_count = sum(1 for i in items if i.open)
    return f"{render_todos(items)}\n[{open_count} open of {len(items)}]"
