"""/compact in a chat: queued as a turn of the conversation's session, its outcome the reply."""

from __future__ import annotations

from habakkuk.engine.home import Home
from tests.channels.e2e_support import rows
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.test_telegram_e2e import OpenRuntime, start  # noqa: F401

SCRIPT = """
- match: "messages_to_fold"
  steps: ["SUMMARY: the user wants milk"]
- steps: ["ok"]
"""


async def test_compact_in_a_chat_replies_with_what_it_did(
    start: OpenRuntime,  # noqa: F811
    tg: FakeTelegram,
    home: Home,
) -> None:
    runtime = await start(SCRIPT)
    tg.message("/help")
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    assert "/compact" in tg.texts()[0]
    tg.message("remember milk")
    await tg.wait_for(lambda: len(tg.texts()) == 2)
    (session,) = await runtime.sessions.list_sessions()
    # A long later turn: over a fifth of the default compact_at, so it is cut inside.
    await runtime.sessions.seed_session(
        session.id, [("user", "list " + "x" * 130_000), ("assistant", "noted")]
    )
    tg.message("/compact")
    await tg.wait_for(lambda: len(tg.texts()) == 3)
    reply = tg.texts()[2]
    assert reply.startswith("Compacted the context") and "3 messages summarized" in reply
    record = await runtime.sessions.compaction(session.id)
    assert record is not None and record.summary == "SUMMARY: the user wants milk"
    (job,) = rows(home, "SELECT id, status FROM jobs WHERE id LIKE 'compact:%'")
    assert job["status"] == "done"
    assert len(await runtime.sessions.messages(session.id)) == 4  # nothing appended
    tg.message("/compact")
    await tg.wait_for(lambda: len(tg.texts()) == 4)
    assert tg.texts()[3].startswith("Nothing was compacted")
