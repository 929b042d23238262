"""GET/POST /api/approvals reach approvals that wait in another process (a chat turn)."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

from habakkuk.runtime import Runtime
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.test_telegram_e2e import APPROVAL_SCRIPT, channel_yaml
from tests.conftest import mock_config


async def test_the_dashboard_lists_and_answers_a_chat_approval_of_another_process(
    runtime_factory: Any, serve: Any, tg: FakeTelegram
) -> None:
    config = mock_config(APPROVAL_SCRIPT, mode="workspace", extra=channel_yaml(tg))
    serving: Runtime = await runtime_factory(config)  # holds the bot, runs the turn
    serving.start_workers()
    assert serving.channels is not None
    await serving.channels.started()
    tg.message("run the thing")
    await tg.wait_for(lambda: any("reply_markup" in c.params for c in tg.of("sendMessage")))
    dashboard = await serve(config, workers=False)  # another process: HTTP only
    [approval] = (await dashboard.get_json("/api/approvals"))["approvals"]
    assert approval["tool"] == "exec"
    assert "echo approved-run" in approval["summary"]
    assert approval["to"] == {"account": "tg", "conversation": "42", "thread": ""}
    assert approval["review"] == ""
    # The prompt's time in the chat process (not when this process first saw it).
    assert datetime.fromisoformat(approval["since"]).timestamp() <= time.time()
    assert (await dashboard.get_json("/api/overview"))["approvals"] == 1
    await dashboard.post_json(f"/api/approvals/{approval['id']}", {"approve": True}, status=200)
    outcome = await asyncio.wait_for(serving.turns.wait_turn(approval["turn"]), 30)
    assert outcome.status == "done"
    results = [
        r for m in await serving.sessions.messages(outcome.session) for r in m.message.tool_results
    ]
    assert "approved-run" in results[0].text
    await tg.wait_for(lambda: "Approved from the dashboard." in tg.texts())
    assert (await dashboard.get_json("/api/approvals"))["approvals"] == []
    assert (await dashboard.get_json("/api/overview"))["approvals"] == 0
    again = await dashboard.post_json(
        f"/api/approvals/{approval['id']}", {"approve": False}, status=404
    )
    assert "not waiting" in again["error"]
