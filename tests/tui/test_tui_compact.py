"""/compact in the chat screen: a compaction queued as a turn of the session, its outcome shown."""

from __future__ import annotations

from tests.conftest import WriteConfig, mock_config
from tests.helpers import eventually
from tests.tui.conftest import chat_of, make_app, notices, running, runtime_of

# The summary call's input is the folded conversation; its own scenario answers it.
SCRIPT = """
- match: "messages_to_fold"
  steps: ["SUMMARY: the user is planning a trip"]
- steps: ["a reply"]
"""


async def test_compact_folds_older_turns_and_notes_the_tokens(write_config: WriteConfig) -> None:
    # Off for turns, so only /compact compacts (with the default 150,000-token budget).
    write_config(mock_config(SCRIPT) + "    compact_at: -1\n")
    app = make_app(None)
    async with running(app, size=(100, 30)) as ui:
        await ui.send("/compact")
        await eventually(
            lambda: "This session has no messages yet." in notices(app), what="the notice"
        )
        runtime = runtime_of(app)
        session = await runtime.sessions.new_session("main", origin="tui")
        # A long first turn (about 32,000 tokens) that a fifth of compact_at cannot keep.
        await runtime.sessions.seed_session(
            session.id, [("user", "hotels " + "h" * 130_000), ("assistant", "noted")]
        )
        chat = chat_of(app)
        chat.open_session(session.id)
        await eventually(lambda: chat.session_id == session.id, what="the session to open")
        await ui.send("plan a trip")
        assert await ui.turn_finished() == "done"
        await ui.send("/compact")
        await eventually(
            lambda: any(n.startswith("Compacted the context") for n in notices(app)),
            what="the compaction note",
        )
        note = next(n for n in notices(app) if n.startswith("Compacted the context"))
        assert "→" in note and "2 messages summarized" in note
        record = await runtime.sessions.compaction(session.id)
        assert record is not None and record.summary == "SUMMARY: the user is planning a trip"
        assert record.first_kept_seq == 2
        # Nothing is appended: the transcript is as it was.
        assert [m.role for m in await runtime.sessions.messages(session.id)] == [
            "user",
            "assistant",
            "user",
            "assistant",
        ]
        assert chat.running_turn is None and chat.queued_turns == []
        await ui.send("/compact")
        await eventually(
            lambda: any(n.startswith("Nothing was compacted") for n in notices(app)),
            what="the nothing-to-do note",
        )


async def test_a_turn_that_compacts_on_its_own_leaves_a_note(write_config: WriteConfig) -> None:
    write_config(mock_config(SCRIPT) + "    compact_at: 2000\n")
    app = make_app(None)
    async with running(app, size=(100, 30)) as ui:
        runtime = runtime_of(app)
        session = await runtime.sessions.new_session("main", origin="tui")
        # Two old turns of about 3,000 tokens each: over compact_at before the next call.
        await runtime.sessions.seed_session(
            session.id,
            [
                ("user", "flights " + "f" * 12_000),
                ("assistant", "noted"),
                ("user", "hotels " + "h" * 12_000),
                ("assistant", "noted"),
            ],
        )
        chat = chat_of(app)
        chat.open_session(session.id)
        await eventually(lambda: chat.session_id == session.id, what="the session to open")
        await ui.send("plan a trip")
        assert await ui.turn_finished() == "done"
        await eventually(
            lambda: any(n.startswith("Context compacted: about") for n in notices(app)),
            what="the automatic compaction note",
        )
        note = next(n for n in notices(app) if n.startswith("Context compacted"))
        assert "older messages summarized" in note
        assert await runtime.sessions.compaction(session.id) is not None
