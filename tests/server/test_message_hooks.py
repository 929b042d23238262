"""message_in, message_out and session_new hooks around a web chat turn (POST /api/chat)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import mock_config
from tests.helpers import eventually
from tests.hook_log import HookLog

OPS = "  ops:\n    model: mock/scripted\n    mode: full\n"


async def test_a_web_chat_turn_fires_message_and_session_hooks_once_each_by_subject(
    serve: Any, tmp_path: Path
) -> None:
    log = HookLog(tmp_path / "hooks")
    hooks = log.config(
        log.entry("message_in", "in-web", "^web$"),
        log.entry("message_in", "in-tg", "^tg$"),
        log.entry("message_out", "out-web", "^web$"),
        log.entry("message_out", "out-tg", "^tg$"),
        log.entry("session_new", "new-main", "^main$"),
        log.entry("session_new", "new-ops", "^ops$"),
    )
    served = await serve(mock_config("- text: 'Echo: {input}'", extra=OPS + hooks))
    sent = await served.post_json("/api/chat", {"conversation": "c1", "text": "hello"})
    runtime = served.runtime

    async def delivered() -> bool:
        job = await runtime.queue.get(f"reply:{sent['turn']}")
        return job is not None and job.status == "done"

    await eventually(delivered, what="the reply's delivery")
    await runtime.hooks.drain()

    assert log.labels() == {"in-web", "out-web", "new-main"}  # the others' match did not find
    [message_in] = log.events("in-web")
    assert message_in["event"] == "message_in"
    assert (message_in["channel"], message_in["type"]) == ("web", "web")
    assert message_in["conversation"] == "web:c1" and message_in["text"] == "hello"
    assert message_in["group"] is False and message_in["attachments"] == []
    [message_out] = log.events("out-web")
    assert message_out["event"] == "message_out"
    assert (message_out["channel"], message_out["conversation"]) == ("web", "web:c1")
    assert message_out["kind"] == "reply" and message_out["text"] == "Echo: hello"
    assert message_out["turn"] == sent["turn"] and message_out["status"] == "done"
    [session_new] = log.events("new-main")
    assert session_new == {
        "event": "session_new",
        "agent": "main",
        "session": sent["session"],
        "origin": "channel:web",
        "chat": True,
    }

    # A command is a message too (its answer goes out); the conversation keeps its session.
    await served.post_json("/api/chat", {"conversation": "c1", "text": "/whoami"})

    async def answered() -> bool:
        return len(log.events("out-web")) == 2

    await eventually(answered, what="the command's answer to fire message_out")
    await runtime.hooks.drain()
    assert [e["text"] for e in log.events("in-web")] == ["hello", "/whoami"]
    assert log.events("out-web")[1]["kind"] == "text"
    assert len(log.events("new-main")) == 1
