"""The chat screen: streamed replies, tool cards, one-key approvals, Ctrl+C, slash commands."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from habakkuk.widgets.approval_prompt import ApprovalPrompt
from habakkuk.widgets.composer import Composer
from habakkuk.widgets.thinking import ThinkingView
from habakkuk.widgets.tool_card import ToolCard
from habakkuk.widgets.user_message import UserMessage
from tests.helpers import eventually
from tests.tui.conftest import ChatApp, a_call_runs, markdown_text, notices, status_text

EXEC_SCRIPT = """
- text: "Running it."
  tool_calls:
    - name: exec
      arguments: {command: "echo approved-output"}
- text: "All done."
"""

TWO_EXECS = """
- tool_calls:
    - name: exec
      arguments: {command: "echo first"}
- tool_calls:
    - name: exec
      arguments: {command: "echo second"}
- text: "Both ran."
"""


def card_header(card: ToolCard) -> str:
    """The card's header line as shown."""
    return str(card.query_one(".header").render())


SLEEP_SCRIPT = """
- text: "Sleeping."
  tool_calls:
    - name: exec
      arguments: {command: "sleep 30"}
- text: "woke up"
"""


async def test_a_sent_message_shows_and_the_mock_reply_streams_in(
    chat_app: ChatApp,
) -> None:
    async with chat_app('- text: "Hello **there**; you said: {input}"') as ui:
        await ui.send("hi bot")
        assert await ui.turn_finished() == "done"
        await eventually(lambda: "you said: hi bot" in markdown_text(ui.app), what="the reply")
        users = [u.text for u in ui.screen.query(UserMessage)]
        assert users == ["hi bot"]
        chat = ui.chat
        assert chat.session_title == "hi bot"
        assert "hi bot" in status_text(ui.app) and "idle" in status_text(ui.app)
        # Tokens come from the usage records of the session.
        await eventually(lambda: " in / " in status_text(ui.app), what="the token count")
        messages = await ui.runtime.sessions.messages(chat.session_id)
        assert [m.role for m in messages] == ["user", "assistant"]


async def test_streamed_fragments_are_coalesced_into_throttled_renders() -> None:
    from textual.app import App, ComposeResult

    from habakkuk.widgets.markdown_stream import StreamingMarkdown

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield StreamingMarkdown()

    app = One()
    async with app.run_test():
        markdown = app.query_one(StreamingMarkdown)
        markdown.feed("alpha ")
        await eventually(lambda: markdown.renders == 1, what="the first render")
        # Two fragments within one interval become one render, shown together.
        markdown.feed("beta ")
        markdown.feed("gamma")
        await eventually(lambda: markdown.renders == 2, what="the second render")
        await eventually(lambda: markdown.source == "alpha beta gamma", what="all text shown")
        assert markdown.renders == 2
        await markdown.finish()
        assert not markdown.streaming


async def test_thinking_is_shown_dimmed_and_collapsible(chat_app: ChatApp) -> None:
    async with chat_app('- {thinking: "let me ponder this", text: "answer"}') as ui:
        await ui.send("q")
        await ui.turn_finished()
        thinking = ui.screen.query_one(ThinkingView)
        assert thinking.text == "let me ponder this"
        assert not thinking.collapsed
        thinking.collapsed = True
        await ui.pilot.pause()
        assert thinking.collapsed


async def test_approval_answered_with_y_runs_the_call_once(chat_app: ChatApp) -> None:
    async with chat_app(EXEC_SCRIPT, mode="ask") as ui:
        await ui.send("run it")
        prompt = ui.screen.query_one(ApprovalPrompt)
        await eventually(lambda: prompt.current is not None, what="the approval prompt")
        assert prompt.current is not None and prompt.current.tool == "exec"
        assert ui.screen.focused is prompt
        await ui.press("y")
        assert await ui.turn_finished() == "done"
        card = ui.screen.query_one(ToolCard)
        assert card.status == "ok" and card.title == "echo approved-output"
        chat = ui.chat
        assert not ui.runtime.tools.grants.allows(chat.session_id, "exec")
        messages = await ui.runtime.sessions.messages(chat.session_id)
        result = messages[2].message.tool_results[0]
        assert not result.is_error and "approved-output" in result.text
        assert ui.screen.query_one(Composer).has_focus


async def test_approval_answered_with_a_allows_the_tool_for_the_session(
    chat_app: ChatApp,
) -> None:
    async with chat_app(TWO_EXECS, mode="ask") as ui:
        await ui.send("twice")
        prompt = ui.screen.query_one(ApprovalPrompt)
        await eventually(lambda: prompt.current is not None, what="the approval prompt")
        await ui.press("a")
        assert await ui.turn_finished() == "done"
        chat = ui.chat
        assert ui.runtime.tools.grants.allows(chat.session_id, "exec")
        cards = list(ui.screen.query(ToolCard))
        assert [c.status for c in cards] == ["ok", "ok"]
        assert prompt.current is None


async def test_approval_answered_with_n_denies_the_call(chat_app: ChatApp) -> None:
    async with chat_app(EXEC_SCRIPT, mode="ask") as ui:
        await ui.send("run it")
        prompt = ui.screen.query_one(ApprovalPrompt)
        await eventually(lambda: prompt.current is not None, what="the approval prompt")
        await ui.press("n")
        assert await ui.turn_finished() == "done"
        card = ui.screen.query_one(ToolCard)
        # The card says the call was denied, with no time: it never ran.
        assert card.status == "denied"
        assert card_header(card).endswith("  denied")
        messages = await ui.runtime.sessions.messages(ui.chat.session_id)
        result = messages[2].message.tool_results[0]
        assert result.is_error and result.text.startswith("denied by")
        # Opened again from the transcript, the card still says denied.
        chat = ui.chat
        await chat.open_session(chat.session_id).wait()
        card = ui.screen.query_one(ToolCard)
        assert card.status == "denied" and card_header(card).endswith("  denied")


async def test_escape_leaves_the_approval_waiting_until_answered_later(
    chat_app: ChatApp,
) -> None:
    async with chat_app(EXEC_SCRIPT, mode="ask") as ui:
        await ui.send("run it")
        prompt = ui.screen.query_one(ApprovalPrompt)
        await eventually(lambda: prompt.current is not None, what="the approval prompt")
        await ui.press("escape")
        assert ui.screen.focused is ui.screen.query_one(Composer)
        # Typing goes to the composer, not to the prompt.
        await ui.press("y")
        assert ui.screen.query_one(Composer).text == "y"
        assert len(ui.runtime.approvals.pending) == 1
        assert prompt.current is not None
        await ui.press("ctrl+g", "y")
        assert await ui.turn_finished() == "done"
        assert ui.runtime.approvals.pending == []


async def test_ctrl_c_stops_a_running_turn_at_once(chat_app: ChatApp) -> None:
    async with chat_app(SLEEP_SCRIPT, mode="full") as ui:
        await ui.send("sleep")
        await a_call_runs(ui.app)
        await ui.press("ctrl+c")
        assert await ui.turn_finished() == "stopped"
        assert "Turn stopped." in notices(ui.app)
        chat = ui.chat
        job = await ui.runtime.queue.get(ui.last_turn)
        assert job is not None and job.finished
        messages = await ui.runtime.sessions.messages(chat.session_id)
        assert messages[-1].message.tool_results[0].is_error
        assert ui.app.is_running  # one press stops the turn; it does not quit


async def test_a_card_waits_for_approval_until_answered_then_runs(
    chat_app: ChatApp,
) -> None:
    async with chat_app(SLEEP_SCRIPT, mode="ask") as ui:
        await ui.send("sleep")
        prompt = ui.screen.query_one(ApprovalPrompt)
        await eventually(lambda: prompt.current is not None, what="the approval prompt")
        card = ui.screen.query_one(ToolCard)
        assert card.status == "waiting"
        assert "waiting for approval" in str(card.query_one(".header").render())
        await ui.press("y")
        await eventually(lambda: card.status == "running", what="the call to run")
        await ui.press("ctrl+c")
        assert await ui.turn_finished() == "stopped"
        assert card.status == "interrupted"
        assert "  interrupted " in card_header(card)  # it ran, so its time is shown


LONG_COMMAND = "echo " + "a-command-long-enough-to-fill-the-row-" * 3 + " && sleep 30"
LONG_SCRIPT = f"""
- text: "Running it."
  tool_calls:
    - name: exec
      arguments: {{command: "{LONG_COMMAND}"}}
- text: "done"
"""


def drawn_header(card: ToolCard) -> str:
    """The card's header as drawn on the screen (what fits of it)."""
    return card.query_one(".header").render_line(0).text


async def test_a_long_command_gives_way_to_the_cards_status_at_80_columns(
    chat_app: ChatApp,
) -> None:
    async with chat_app(LONG_SCRIPT, mode="ask") as ui:
        await ui.send("run")
        prompt = ui.screen.query_one(ApprovalPrompt)
        await eventually(lambda: prompt.current is not None, what="the approval prompt")
        card = ui.screen.query_one(ToolCard)
        await eventually(
            lambda: drawn_header(card).rstrip().endswith("waiting for approval"),
            what=f"the whole status drawn, not {drawn_header(card)!r}",
        )
        assert "exec  echo a-command-long" in drawn_header(card)
        assert "…  waiting for approval" in drawn_header(card)  # the command is what is cut
        await ui.press("n")
        await eventually(lambda: card.status == "denied", what="the call to be denied")
        await eventually(
            lambda: drawn_header(card).rstrip().endswith("  denied"), what="the denial drawn"
        )


async def test_a_stopped_turn_withdraws_its_approval_prompt(chat_app: ChatApp) -> None:
    async with chat_app(SLEEP_SCRIPT, mode="ask") as ui:
        await ui.send("sleep")
        prompt = ui.screen.query_one(ApprovalPrompt)
        await eventually(lambda: prompt.current is not None, what="the approval prompt")
        await ui.press("ctrl+c")
        assert await ui.turn_finished() == "stopped"
        await eventually(lambda: prompt.current is None, what="the prompt to be withdrawn")
        assert ui.runtime.approvals.pending == []
        assert not prompt.has_class("-waiting")
        # Stopped while it waited for approval: it never ran, so it is "not run".
        card = ui.screen.query_one(ToolCard)
        await eventually(lambda: card.status == "not_run", what="the card to say not run")
        assert card_header(card).endswith("  not run")
        chat = ui.chat
        stored = (await ui.runtime.sessions.messages(chat.session_id))[-1].message.tool_results[0]
        assert stored.text.startswith("not run")
        await chat.open_session(chat.session_id).wait()
        card = ui.screen.query_one(ToolCard)
        assert card.status == "not_run" and card_header(card).endswith("  not run")


async def test_ctrl_c_twice_quits(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await ui.press("ctrl+c")
        assert ui.app.is_running
        # The second press quits: the app exits, so do not wait for the screen afterwards.
        ui.app.simulate_key("ctrl+c")
        await eventually(lambda: ui.app.return_code is not None, what="the app to exit")
    assert ui.app.runtime is None


async def test_ctrl_c_over_selected_text_copies_it_and_stops_nothing(
    chat_app: ChatApp,
) -> None:
    from textual.selection import Selection

    async with chat_app(SLEEP_SCRIPT, mode="full") as ui:
        await ui.send("sleep")
        await a_call_runs(ui.app)
        said = ui.screen.query_one(UserMessage)
        ui.screen.selections = {said: Selection(None, None)}  # as a mouse drag leaves it
        await ui.press("ctrl+c")
        assert ui.app.clipboard == "sleep"
        assert "Copied 5 characters." in ui.toasts()
        assert ui.chat.running_turn is not None and not ui.screen.selections
        # The copy was not a first press: this one stops the turn and does not quit.
        await ui.press("ctrl+c")
        assert await ui.turn_finished() == "stopped"
        assert ui.app.is_running


async def test_ctrl_c_in_the_composer_copies_its_selection(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        composer = ui.screen.query_one(Composer)
        composer.insert("draft to keep")
        composer.select_all()
        await ui.press("ctrl+c")
        assert ui.app.clipboard == "draft to keep"
        assert composer.text == "draft to keep" and not composer.selected_text
        assert ui.toasts() == ["Copied 13 characters."]


async def test_tool_card_expands_to_the_full_output_from_the_transcript(
    chat_app: ChatApp,
) -> None:
    async with chat_app(EXEC_SCRIPT, mode="full") as ui:
        await ui.send("run")
        await ui.turn_finished()
        card = ui.screen.query_one(ToolCard)
        card.focus()
        await ui.press("enter")
        output = card.query_one(".output", Static)
        await eventually(lambda: "approved-output" in str(output.content), what="the card's output")
        assert card.expanded


async def test_composer_history_recalls_sent_messages_with_up_and_down(
    chat_app: ChatApp,
) -> None:
    async with chat_app() as ui:
        composer = ui.screen.query_one(Composer)
        await ui.send("first")
        await ui.turn_finished()
        await ui.send("second")
        await ui.turn_finished()
        await ui.press(*"draft")
        await ui.press("up")
        assert composer.text == "second"
        await ui.press("up")
        assert composer.text == "first"
        await ui.press("down")
        assert composer.text == "second"
        await ui.press("down")
        assert composer.text == "draft"


async def test_ctrl_j_adds_a_line_and_enter_sends_both(chat_app: ChatApp) -> None:
    async with chat_app('- text: "got it"') as ui:
        await ui.press(*"one", "ctrl+j", *"two")
        assert ui.screen.query_one(Composer).text == "one\ntwo"
        await ui.press("enter")
        await ui.turn_finished()
        assert [u.text for u in ui.screen.query(UserMessage)] == ["one\ntwo"]


async def test_tab_completes_a_slash_command(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await ui.press("slash", "c")
        hint = ui.screen.query_one("#hint", Static)
        await eventually(lambda: hint.display, what="the completion hint")
        assert "/compact" in str(hint.content)
        await ui.press("tab")
        assert ui.screen.query_one(Composer).text == "/compact "


async def test_fork_command_switches_the_chat_to_a_copy_of_the_session(
    chat_app: ChatApp,
) -> None:
    async with chat_app('- text: "a reply"') as ui:
        await ui.press(*"/fork", "enter")
        await eventually(
            lambda: "This session has no messages yet." in notices(ui.app), what="the notice"
        )
        await ui.send("plan a trip")
        assert await ui.turn_finished() == "done"
        chat = ui.chat
        source = chat.session_id
        await ui.send("/fork")
        await eventually(lambda: chat.session_id != source, what="the chat on the fork")
        await eventually(
            lambda: any("the original is kept" in n for n in notices(ui.app)), what="the note"
        )
        fork = await ui.runtime.sessions.session(chat.session_id)
        assert fork.forked_from == source
        assert [u.text for u in ui.screen.query(UserMessage)] == ["plan a trip"]
        await ui.send("go by train")
        assert await ui.turn_finished() == "done"
        assert [m.role for m in await ui.runtime.sessions.messages(fork.id)] == [
            "user",
            "assistant",
            "user",
            "assistant",
        ]
        assert len(await ui.runtime.sessions.messages(source)) == 2


async def test_title_and_export_commands_use_the_session(
    chat_app: ChatApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with chat_app('- text: "reply"') as ui:
        await ui.send("hello")
        await ui.turn_finished()
        await ui.send("/title Trip plans")
        await eventually(lambda: "Title set: Trip plans" in notices(ui.app), what="the title")
        chat = ui.chat
        assert (await ui.runtime.sessions.session(chat.session_id)).title == "Trip plans"
        await ui.send("/export json")
        # Not the folder the app was started from: HOME/exports/, created on demand.
        target = ui.runtime.home.root / "exports" / f"{chat.session_id}.json"
        await eventually(lambda: f"Wrote {target}" in notices(ui.app), what="the export")
        assert '"role": "assistant"' in target.read_text() or '"assistant"' in target.read_text()
        assert not list(tmp_path.glob("ses_*"))
        await ui.send("/export out.txt")
        await eventually(
            lambda: any("must end in .md" in n for n in notices(ui.app)), what="the error"
        )
        # A path is created as needed; one under a file is a one-line error.
        await ui.send("/export notes/trip.md")
        await eventually((tmp_path / "notes" / "trip.md").exists, what="the named export")
        (tmp_path / "plain").write_text("a file")
        await ui.send("/export plain/x.md")
        await eventually(
            lambda: any(n.startswith("/export: cannot write plain/x.md") for n in notices(ui.app)),
            what="the write error",
        )


async def test_new_session_key_starts_afresh(chat_app: ChatApp) -> None:
    async with chat_app('- text: "reply"') as ui:
        await ui.send("hello")
        await ui.turn_finished()
        chat = ui.chat
        first = chat.session_id
        await ui.press("ctrl+n")
        await eventually(lambda: not chat.session_id, what="a fresh session")
        assert not list(ui.screen.query(UserMessage))
        await ui.send("again")
        await ui.turn_finished()
        assert chat.session_id and chat.session_id != first


async def test_model_command_shows_and_sets_the_session_model(chat_app: ChatApp) -> None:
    async with chat_app('- text: "reply"') as ui:
        await ui.send("hello")
        await ui.turn_finished()
        await ui.send("/model")
        await eventually(
            lambda: any("chain is mock/scripted" in n for n in notices(ui.app)), what="chain"
        )
        await ui.send("/model nowhere/x")
        await eventually(
            lambda: any("'nowhere' is not configured" in n for n in notices(ui.app)), what="error"
        )
        await ui.send("/model mock/other")
        await eventually(
            lambda: any("now tries mock/other first" in n for n in notices(ui.app)), what="set"
        )
        chat = ui.chat
        assert str(await ui.runtime.settings.session_model(chat.session_id)) == "mock/other"
        assert "mock/other" in status_text(ui.app)


async def test_undo_asks_the_runtime_and_shows_its_answer(chat_app: ChatApp) -> None:
    async with chat_app('- text: "reply"') as ui:
        await ui.send("/undo")
        await eventually(
            lambda: "This session has no messages yet." in notices(ui.app), what="the notice"
        )
        await ui.send("hello")
        await ui.turn_finished()
        await ui.send("/undo")
        # The turn changed no files, so the runtime has nothing to restore (or checkpoints
        # are off where git is missing); either way its own answer is shown.
        await eventually(
            lambda: any(
                n.startswith(("nothing to undo", "checkpoints are off")) for n in notices(ui.app)
            ),
            what="the runtime's answer",
        )


async def test_help_lists_the_commands(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await ui.send("/help")
        await eventually(lambda: any("/export" in n for n in notices(ui.app)), what="help")
        assert any("PgUp/PgDn scroll the chat" in n for n in notices(ui.app))


async def test_a_command_answered_while_a_reply_streams_leaves_the_reply_one_widget(
    chat_app: ChatApp,
) -> None:
    from habakkuk.engine.events import ModelReplied, TurnEnded, TurnStarted, TurnText
    from habakkuk.widgets.markdown_stream import StreamingMarkdown
    from habakkuk.widgets.message_view import MessageView
    from habakkuk.widgets.notice import Notice

    async with chat_app() as ui:
        await ui.send("hello")
        await ui.turn_finished()
        session, bus = ui.chat.session_id, ui.runtime.bus
        view = ui.screen.query_one(MessageView)
        before = len(view.query(StreamingMarkdown))
        # A turn streams its reply (its events on the runtime's bus, as a worker sends them).
        bus.publish(TurnStarted(session=session, turn="turn_live", agent="main"))
        bus.publish(TurnText(session=session, turn="turn_live", text="First half of the reply, "))
        await eventually(lambda: "First half" in view.streaming_text, what="the reply to stream")
        await ui.send("/help")  # answered at once, while the reply still streams
        await eventually(lambda: any("/export" in n for n in notices(ui.app)), what="the help")
        bus.publish(TurnText(session=session, turn="turn_live", text="second half."))
        await eventually(lambda: "second half" in view.streaming_text, what="the rest")
        bus.publish(ModelReplied(session=session, turn="turn_live", model="m", usage={},
                                 stop_reason="end_turn"))  # fmt: skip
        bus.publish(TurnEnded(session=session, turn="turn_live", status="done"))
        await eventually(lambda: view.streaming_text == "", what="the reply to end")
        replies = list(view.query(StreamingMarkdown))[before:]
        assert [r.text for r in replies] == ["First half of the reply, second half."]
        help_note = next(n for n in view.query(Notice) if "/export" in n.text)
        children = list(view.children)
        assert children.index(help_note) > children.index(replies[0])  # the note follows it
        assert help_note.region.height > 0  # and is shown


async def test_quitting_mid_turn_keeps_committed_messages_and_the_turn_resumes_next_start(
    chat_app: ChatApp,
) -> None:
    async with chat_app(SLEEP_SCRIPT, mode="full") as first:
        await first.send("sleep")
        await a_call_runs(first.app)
        session, turn = first.chat.session_id, first.last_turn
        await first.app.action_quit()
    async with chat_app(SLEEP_SCRIPT, mode="full") as second:
        second.app.open_session(session)
        # The released turn is claimed again: the interrupted call gets its result and the
        # next scripted reply follows.
        await eventually(lambda: "woke up" in markdown_text(second.app), what="the resumed turn")
        job = await second.runtime.queue.get(turn)
        assert job is not None and job.status == "done"
        messages = await second.runtime.sessions.messages(session)
        texts = [m.message.text for m in messages if m.role == "assistant"]
        assert texts == ["Sleeping.", "woke up"]
        assert [u.text for u in second.screen.query(UserMessage)] == ["sleep"]


CLARIFY_SCRIPT = """
- text: "One question first."
  tool_calls:
    - name: clarify
      arguments:
        questions:
          - question: "Which colour?"
            choices: ["red", "blue"]
- text: "Noted."
"""


async def test_clarify_questions_show_lettered_choices_and_the_next_message_answers(
    chat_app: ChatApp,
) -> None:
    from habakkuk.widgets.question_prompt import QuestionPrompt

    async with chat_app(CLARIFY_SCRIPT, mode="ask") as ui:
        await ui.send("paint it")
        question = ui.screen.query_one(QuestionPrompt)
        await eventually(lambda: question.current is not None, what="the question")
        shown = str(question.content)
        assert "Which colour?" in shown and "a) red" in shown and "b) blue" in shown
        assert ui.screen.focused is ui.screen.query_one(Composer)
        await ui.press("b", "enter")
        assert await ui.turn_finished() == "done"
        assert question.current is None
        messages = await ui.runtime.sessions.messages(ui.chat.session_id)
        result = messages[2].message.tool_results[0]
        assert not result.is_error and result.text == "the user answered:\nb"
        # The answer is not sent as a message of its own.
        assert [u.text for u in ui.screen.query(UserMessage)] == ["paint it"]


async def test_a_stopped_turn_withdraws_its_question(chat_app: ChatApp) -> None:
    from habakkuk.widgets.question_prompt import QuestionPrompt

    async with chat_app(CLARIFY_SCRIPT, mode="ask") as ui:
        await ui.send("paint it")
        question = ui.screen.query_one(QuestionPrompt)
        await eventually(lambda: question.current is not None, what="the question")
        await ui.press("ctrl+c")
        assert await ui.turn_finished() == "stopped"
        await eventually(lambda: question.current is None, what="the question withdrawn")
        assert ui.runtime.approvals.questions == []
