"""/btw's throwaway session: a question answered beside the main conversation.

The session is of the same agent, with origin ASIDE_ORIGIN (the sessions lists skip it),
and its one turn's message carries the main conversation as text: the latest summary and
the messages after it, the newest SEED_BYTES of them. It runs on its own serial key (its
own session), so beside the main turn, and never touches the main transcript or the
conversation's binding.
"""

from __future__ import annotations

from habakkuk.engine.llm.types import Message, TextBlock, ToolResultBlock, ToolUseBlock
from habakkuk.engine.sessions import TranscriptView

# How much of the main conversation the aside's message carries (the newest part).
SEED_BYTES = 40 * 1024
HEAD = "[the conversation so far, for context: answer the question after it]\n"
QUESTION = "\n[a question asked aside; answer it briefly from the conversation above]\n"


def _line(message: Message) -> str:
    """One message as a line of text: the role, then its words, calls and results."""
    parts: list[str] = []
    for block in message.blocks:
        if isinstance(block, TextBlock) and block.text:
            parts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            parts.append(f"[called {block.tool}]")
        elif isinstance(block, ToolResultBlock):
            parts.append(f"[result: {block.text[:500]}]")
    return f"{message.role}: " + "\n".join(parts) if parts else ""


def seed_text(view: TranscriptView) -> str:
    """The main conversation as text: the latest summary and the messages after it,
    cut to its newest SEED_BYTES (at a line's start)."""
    lines = [line for line in (_line(m) for m in view.messages) if line]
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        size += len(line.encode("utf-8")) + 1
        if size > SEED_BYTES:
            if not kept:  # one message longer than the whole seed: its newest part
                kept.append(line.encode("utf-8")[-SEED_BYTES:].decode("utf-8", "ignore"))
            break
        kept.append(line)
    return "\n".join(reversed(kept))


def aside_text(view: TranscriptView, question: str) -> str:
    """The aside turn's message: the main conversation, then the question."""
    seed = seed_text(view)
    return (HEAD + seed + "\n" if seed else "") + QUESTION + question
