"""Shared set-up of the delegation tests: a runtime on the scripted fake model server.

The parent agent `main` talks Chat Completions; the agent `helper` talks Anthropic
Messages, so the parent's and the children's replies come from separate script queues
and their order never depends on which runs first.
"""

from __future__ import annotations

from typing import Any

from habakkuk.engine.llm.types import ContextBlock
from tests.fakes.model_server import FakeModelServer, ToolCall

CONFIG = """
providers:
  fake:
    type: openai
    base_url: {url}/v1
    key_env: FAKE_KEY
  claude:
    type: anthropic
    base_url: {url}
    key_env: FAKE_KEY
title_model: off  # the scripts count the model calls: no background titles
agents:
  main:
    model: fake/gpt-fake
    mode: {mode}
    workspace: {workspace}
  helper:
    model: claude/claude-fake
    mode: full
    toolsets: [core, delegate]
{extra}
"""


def config(server: FakeModelServer, workspace: Any, *, mode: str = "full", extra: str = "") -> str:
    return CONFIG.format(url=server.base_url, mode=mode, workspace=workspace, extra=extra)


def delegate(task: str, call_id: str | None = None, **options: Any) -> ToolCall:
    return ToolCall("delegate", {"task": task, **options}, id=call_id)


def tool_results(request: Any) -> list[str]:
    """The tool results' text a Chat Completions request carries (the parent's view)."""
    return [str(m.get("content")) for m in request.json["messages"] if m.get("role") == "tool"]


def corrections(messages: list[Any]) -> list[str]:
    """The output_schema corrections in a child's stored transcript."""
    return [
        b.text
        for m in messages
        for b in m.message.blocks
        if isinstance(b, ContextBlock) and b.kind == "output_schema"
    ]
