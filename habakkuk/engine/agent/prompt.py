"""System prompt assembly (frozen per session) and the per-turn user message.

The system prompt is built once when a session starts and stored with it, so
the cached prefix never moves. Anything that changes (the time) goes into the
user message instead.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from ..config import AgentConfig
from ..llm.types import ContextBlock, Message, TextBlock

BASE_PROMPT = """You are {name}, a helpful AI agent running inside Habakkuk.

You work in the workspace folder {workspace}; relative paths in tools resolve there.
Permission mode: {mode}. {mode_note}

Use tools when they help; read before you change things; keep answers concise.
When a tool call is refused or fails, read the reason and take another route or ask the user.
A tool result marked "interrupted" means the process stopped while the call ran:
check the current state before you repeat anything with side effects."""

MODE_NOTES = {
    "read-only": "You can read files but not change them or run commands.",
    "ask": "Every change and command is shown to the user for approval first.",
    "workspace": "You may change files inside the workspace; commands need approval.",
    "full": "You may change files and run commands without asking.",
}


def build_system_prompt(agent: AgentConfig) -> str:
    """The frozen system prompt for a new session of `agent`."""
    prompt = BASE_PROMPT.format(
        name=agent.name,
        workspace=agent.workspace_path,
        mode=agent.mode,
        mode_note=MODE_NOTES[agent.mode],
    )
    if agent.instructions.strip():
        prompt += "\n\n# Instructions\n" + agent.instructions.strip()
    return prompt


def user_message(text: str, timezone: str, now: datetime | None = None) -> Message:
    """The stored user message: what the user wrote, then the current time.

    The time is a context block: the model is sent it as text, as before, while
    titles, search, exports and views keep to the user's words.
    """
    moment = (now or datetime.now(ZoneInfo(timezone))).astimezone(ZoneInfo(timezone))
    stamp = moment.strftime(f"%Y-%m-%d %H:%M ({timezone})")
    return Message("user", [TextBlock(text), ContextBlock(f"[current time: {stamp}]", "time")])
