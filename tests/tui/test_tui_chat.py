"""The chat screen: streamed replies, tool cards, one-key approvals, Ctrl+C, slash commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.widgets.approval_prompt import ApprovalPrompt
from habakkuk.widgets.composer import Composer
from habakkuk.widgets.thinking import ThinkingView
from habakkuk.widgets.tool_card import ToolCard
from habakkuk.widgets.user_message import UserMessage
from tests.conftest import WriteConfig, mock_config
from tests.tui.conftest import (
    a_call_runs,
    make_app,
    markdown_text,
    notices,
    ready,
    send,
    toasts,
    turn_finished,
    wait_until,
)

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
    write_config: WriteConfig,
) -> None:
    write_config(mock_config('- text: "Hello **there**; you said: {input}"'))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "hi bot")
        assert await turn_finished(pilot) == "done"
        await wait_until(pilot, lambda: "you said: hi bot" in markdown_text(app), "the reply")
        users = [u.text for u in app.screen.query(UserMessage)]
        assert users == ["hi bot"]
        chat = app.get_chat()
        assert chat.session_title == "hi bot"
        assert "hi bot" in chat._status.plain and "idle" in chat._status.plain
        # Tokens come from the usage records of the session.
        await wait_until(pilot, lambda: " in / " in chat._status.plain, "the token count")
        messages = await app.runtime.messages(chat.session_id)
        assert [m.role for m in messages] == ["user", "assistant"]


async def test_streamed_fragments_are_coalesced_into_throttled_renders() -> None:
    from textual.app import App, ComposeResult

    from habakkuk.widgets.markdown_stream import StreamingMarkdown

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield StreamingMarkdown()

    app = One()
    async with app.run_test() as pilot:
        markdown = app.query_one(StreamingMarkdown)
        markdown.feed("alpha ")
        await wait_until(pilot, lambda: markdown.renders == 1, "the first render")
        # Two fragments within one interval become one render, shown together.
        markdown.feed("beta ")
        markdown.feed("gamma")
        await wait_until(pilot, lambda: markdown.renders == 2, "the second render")
        await wait_until(pilot, lambda: markdown.source == "alpha beta gamma", "all text shown")
        assert markdown.renders == 2
        await markdown.finish()
        assert not markdown.streaming


async def test_thinking_is_shown_dimmed_and_collapsible(write_config: WriteConfig) -> None:
    write_config(mock_config('- {thinking: "let me ponder this", text: "answer"}'))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "q")
        await turn_finished(pilot)
        thinking = app.screen.query_one(ThinkingView)
        assert thinking.text == "let me ponder this"
        assert not thinking.collapsed
        thinking.collapsed = True
        await pilot.pause()
        assert thinking.collapsed


async def test_approval_answered_with_y_runs_the_call_once(write_config: WriteConfig) -> None:
    write_config(mock_config(EXEC_SCRIPT, mode="ask"))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "run it")
        prompt = app.screen.query_one(ApprovalPrompt)
        await wait_until(pilot, lambda: prompt.current is not None, "the approval prompt")
        assert prompt.current.tool == "exec"
        assert app.screen.focused is prompt
        await pilot.press("y")
        assert await turn_finished(pilot) == "done"
        card = app.screen.query_one(ToolCard)
        assert card.status == "ok" and card.title == "echo approved-output"
        chat = app.get_chat()
        assert not app.runtime.tools.grants.allows(chat.session_id, "exec")
        messages = await app.runtime.messages(chat.session_id)
        result = messages[2].message.tool_results[0]
        assert not result.is_error and "approved-output" in result.text
        assert app.screen.focused is app.screen.query_one(Composer)


async def test_approval_answered_with_a_allows_the_tool_for_the_session(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config(TWO_EXECS, mode="ask"))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "twice")
        prompt = app.screen.query_one(ApprovalPrompt)
        await wait_until(pilot, lambda: prompt.current is not None, "the approval prompt")
        await pilot.press("a")
        assert await turn_finished(pilot) == "done"
        chat = app.get_chat()
        assert app.runtime.tools.grants.allows(chat.session_id, "exec")
        cards = list(app.screen.query(ToolCard))
        assert [c.status for c in cards] == ["ok", "ok"]
        assert prompt.current is None


async def test_approval_answered_with_n_denies_the_call(write_config: WriteConfig) -> None:
    write_config(mock_config(EXEC_SCRIPT, mode="ask"))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "run it")
        prompt = app.screen.query_one(ApprovalPrompt)
        await wait_until(pilot, lambda: prompt.current is not None, "the approval prompt")
        await pilot.press("n")
        assert await turn_finished(pilot) == "done"
        card = app.screen.query_one(ToolCard)
        # The card says the call was denied, with no time: it never ran.
        assert card.status == "denied"
        assert card_header(card).endswith("  denied")
        messages = await app.runtime.messages(app.get_chat().session_id)
        result = messages[2].message.tool_results[0]
        assert result.is_error and result.text.startswith("denied by")
        # Opened again from the transcript, the card still says denied.
        chat = app.get_chat()
        await chat._open(chat.session_id).wait()
        card = app.screen.query_one(ToolCard)
        assert card.status == "denied" and card_header(card).endswith("  denied")


async def test_escape_leaves_the_approval_waiting_until_answered_later(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config(EXEC_SCRIPT, mode="ask"))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "run it")
        prompt = app.screen.query_one(ApprovalPrompt)
        await wait_until(pilot, lambda: prompt.current is not None, "the approval prompt")
        await pilot.press("escape")
        assert app.screen.focused is app.screen.query_one(Composer)
        # Typing goes to the composer, not to the prompt.
        await pilot.press("y")
        assert app.screen.query_one(Composer).text == "y"
        assert len(app.runtime.approvals.pending) == 1
        assert prompt.current is not None
        await pilot.press("ctrl+g", "y")
        assert await turn_finished(pilot) == "done"
        assert app.runtime.approvals.pending == []


async def test_ctrl_c_stops_a_running_turn_at_once(write_config: WriteConfig) -> None:
    write_config(mock_config(SLEEP_SCRIPT, mode="full"))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "sleep")
        await a_call_runs(pilot, app)
        await pilot.press("ctrl+c")
        assert await turn_finished(pilot) == "stopped"
        assert "Turn stopped." in notices(app)
        chat = app.get_chat()
        job = await app.runtime.queue.get(chat.last_turn)
        assert job is not None and job.finished
        messages = await app.runtime.messages(chat.session_id)
        assert messages[-1].message.tool_results[0].is_error
        assert app.is_running  # one press stops the turn; it does not quit


async def test_a_card_waits_for_approval_until_answered_then_runs(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config(SLEEP_SCRIPT, mode="ask"))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "sleep")
        prompt = app.screen.query_one(ApprovalPrompt)
        await wait_until(pilot, lambda: prompt.current is not None, "the approval prompt")
        card = app.screen.query_one(ToolCard)
        assert card.status == "waiting"
        assert "waiting for approval" in str(card.query_one(".header").render())
        await pilot.press("y")
        await wait_until(pilot, lambda: card.status == "running", "the call to run")
        await pilot.press("ctrl+c")
        assert await turn_finished(pilot) == "stopped"
        assert card.status == "interrupted"
        assert "  interrupted " in card_header(card)  # it ran, so its time is shown


async def test_a_stopped_turn_withdraws_its_approval_prompt(write_config: WriteConfig) -> None:
    write_config(mock_config(SLEEP_SCRIPT, mode="ask"))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "sleep")
        prompt = app.screen.query_one(ApprovalPrompt)
        await wait_until(pilot, lambda: prompt.current is not None, "the approval prompt")
        await pilot.press("ctrl+c")
        assert await turn_finished(pilot) == "stopped"
        await wait_until(pilot, lambda: prompt.current is None, "the prompt to be withdrawn")
        assert app.runtime.approvals.pending == []
        assert not prompt.has_class("-waiting")
        # Stopped while it waited for approval: it never ran, so it is "not run".
        card = app.screen.query_one(ToolCard)
        await wait_until(pilot, lambda: card.status == "not_run", "the card to say not run")
        assert card_header(card).endswith("  not run")
        chat = app.get_chat()
        stored = (await app.runtime.messages(chat.session_id))[-1].message.tool_results[0]
        assert stored.text.startswith("not run")
        await chat._open(chat.session_id).wait()
        card = app.screen.query_one(ToolCard)
        assert card.status == "not_run" and card_header(card).endswith("  not run")


async def test_ctrl_c_twice_quits(write_config: WriteConfig) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+c")
        assert app.is_running
        # The second press quits: the app exits, so do not wait for the screen afterwards.
        app.simulate_key("ctrl+c")
        await wait_until(pilot, lambda: app._exit, "the app to exit")
    assert app.runtime is None


async def test_ctrl_c_over_selected_text_copies_it_and_stops_nothing(
    write_config: WriteConfig,
) -> None:
    from textual.selection import Selection

    write_config(mock_config(SLEEP_SCRIPT, mode="full"))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "sleep")
        await a_call_runs(pilot, app)
        said = app.screen.query_one(UserMessage)
        app.screen.selections = {said: Selection(None, None)}  # as a mouse drag leaves it
        await pilot.press("ctrl+c")
        assert app.clipboard == "sleep"
        assert "Copied 5 characters." in toasts(app)
        assert app.get_chat().running_turn is not None and not app.screen.selections
        # The copy was not a first press: this one stops the turn and does not quit.
        await pilot.press("ctrl+c")
        assert await turn_finished(pilot) == "stopped"
        assert app.is_running


async def test_ctrl_c_in_the_composer_copies_its_selection(write_config: WriteConfig) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        composer = app.screen.query_one(Composer)
        composer.insert("draft to keep")
        composer.select_all()
        await pilot.press("ctrl+c")
        assert app.clipboard == "draft to keep"
        assert composer.text == "draft to keep" and not composer.selected_text
        assert toasts(app) == ["Copied 13 characters."]


async def test_tool_card_expands_to_the_full_output_from_the_transcript(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config(EXEC_SCRIPT, mode="full"))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "run")
        await turn_finished(pilot)
        card = app.screen.query_one(ToolCard)
        card.focus()
        await pilot.press("enter")
        output = card.query_one(".output")
        await wait_until(
            pilot, lambda: "approved-output" in str(output.content), "the card's output"
        )
        assert card.expanded


async def test_composer_history_recalls_sent_messages_with_up_and_down(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        composer = app.screen.query_one(Composer)
        await send(pilot, "first")
        await turn_finished(pilot)
        await send(pilot, "second")
        await turn_finished(pilot)
        await pilot.press(*"draft")
        await pilot.press("up")
        assert composer.text == "second"
        await pilot.press("up")
        assert composer.text == "first"
        await pilot.press("down")
        assert composer.text == "second"
        await pilot.press("down")
        assert composer.text == "draft"


async def test_ctrl_j_adds_a_line_and_enter_sends_both(write_config: WriteConfig) -> None:
    write_config(mock_config('- text: "got it"'))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"one", "ctrl+j", *"two")
        assert app.screen.query_one(Composer).text == "one\ntwo"
        await pilot.press("enter")
        await turn_finished(pilot)
        assert [u.text for u in app.screen.query(UserMessage)] == ["one\ntwo"]


async def test_tab_completes_a_slash_command(write_config: WriteConfig) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("slash", "c")
        hint = app.screen.query_one("#hint")
        await wait_until(pilot, lambda: hint.display, "the completion hint")
        assert "/compact" in str(hint.content)
        await pilot.press("tab")
        assert app.screen.query_one(Composer).text == "/compact "


async def test_fork_command_switches_the_chat_to_a_copy_of_the_session(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config('- text: "a reply"'))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"/fork", "enter")
        await wait_until(
            pilot, lambda: "This session has no messages yet." in notices(app), "the notice"
        )
        await send(pilot, "plan a trip")
        assert await turn_finished(pilot) == "done"
        chat = app.get_chat()
        source = chat.session_id
        await send(pilot, "/fork")
        await wait_until(pilot, lambda: chat.session_id != source, "the chat on the fork")
        await wait_until(
            pilot, lambda: any("the original is kept" in n for n in notices(app)), "the note"
        )
        fork = await app.runtime.session(chat.session_id)
        assert fork.forked_from == source
        assert [u.text for u in app.screen.query(UserMessage)] == ["plan a trip"]
        await send(pilot, "go by train")
        assert await turn_finished(pilot) == "done"
        assert [m.role for m in await app.runtime.messages(fork.id)] == [
            "user",
            "assistant",
            "user",
            "assistant",
        ]
        assert len(await app.runtime.messages(source)) == 2


async def test_title_and_export_commands_use_the_session(
    write_config: WriteConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_config(mock_config('- text: "reply"'))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await turn_finished(pilot)
        await send(pilot, "/title Trip plans")
        await wait_until(pilot, lambda: "Title set: Trip plans" in notices(app), "the title")
        chat = app.get_chat()
        assert (await app.runtime.session(chat.session_id)).title == "Trip plans"
        await send(pilot, "/export json")
        # Not the folder the app was started from: HOME/exports/, created on demand.
        target = app.runtime.home.root / "exports" / f"{chat.session_id}.json"
        await wait_until(pilot, lambda: f"Wrote {target}" in notices(app), "the export")
        assert '"role": "assistant"' in target.read_text() or '"assistant"' in target.read_text()
        assert not list(tmp_path.glob("ses_*"))
        await send(pilot, "/export out.txt")
        await wait_until(
            pilot, lambda: any("must end in .md" in n for n in notices(app)), "the error"
        )
        # A path is created as needed; one under a file is a one-line error.
        await send(pilot, "/export notes/trip.md")
        await wait_until(pilot, (tmp_path / "notes" / "trip.md").exists, "the named export")
        (tmp_path / "plain").write_text("a file")
        await send(pilot, "/export plain/x.md")
        await wait_until(
            pilot,
            lambda: any(n.startswith("/export: cannot write plain/x.md") for n in notices(app)),
            "the write error",
        )


async def test_new_session_key_starts_afresh(write_config: WriteConfig) -> None:
    write_config(mock_config('- text: "reply"'))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await turn_finished(pilot)
        chat = app.get_chat()
        first = chat.session_id
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: not chat.session_id, "a fresh session")
        assert not list(app.screen.query(UserMessage))
        await send(pilot, "again")
        await turn_finished(pilot)
        assert chat.session_id and chat.session_id != first


async def test_model_command_shows_and_sets_the_session_model(write_config: WriteConfig) -> None:
    write_config(mock_config('- text: "reply"'))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await turn_finished(pilot)
        await send(pilot, "/model")
        await wait_until(
            pilot, lambda: any("chain is mock/scripted" in n for n in notices(app)), "chain"
        )
        await send(pilot, "/model nowhere/x")
        await wait_until(
            pilot, lambda: any("'nowhere' is not configured" in n for n in notices(app)), "error"
        )
        await send(pilot, "/model mock/other")
        await wait_until(
            pilot, lambda: any("now tries mock/other first" in n for n in notices(app)), "set"
        )
        chat = app.get_chat()
        assert str(await app.runtime.session_model(chat.session_id)) == "mock/other"
        assert "mock/other" in chat._status.plain


async def test_undo_asks_the_runtime_and_shows_its_answer(write_config: WriteConfig) -> None:
    write_config(mock_config('- text: "reply"'))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "/undo")
        await wait_until(
            pilot, lambda: "This session has no messages yet." in notices(app), "the notice"
        )
        await send(pilot, "hello")
        await turn_finished(pilot)
        await send(pilot, "/undo")
        # The turn changed no files, so the runtime has nothing to restore (or checkpoints
        # are off where git is missing); either way its own answer is shown.
        await wait_until(
            pilot,
            lambda: any(
                n.startswith(("nothing to undo", "checkpoints are off")) for n in notices(app)
            ),
            "the runtime's answer",
        )


async def test_help_lists_the_commands(write_config: WriteConfig) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "/help")
        await wait_until(pilot, lambda: any("/export" in n for n in notices(app)), "help")
        assert any("PgUp/PgDn scroll the chat" in n for n in notices(app))


async def test_quitting_mid_turn_keeps_committed_messages_and_the_turn_resumes_next_start(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config(SLEEP_SCRIPT, mode="full"))
    first = make_app(None)
    async with first.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "sleep")
        await a_call_runs(pilot, first)
        chat = first.get_chat()
        session, turn = chat.session_id, chat.last_turn
        await first.action_quit()
    second = make_app(None)
    async with second.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        second.open_session(session)
        # The released turn is claimed again: the interrupted call gets its result and the
        # next scripted reply follows.
        await wait_until(pilot, lambda: "woke up" in markdown_text(second), "the resumed turn")
        job = await second.runtime.queue.get(turn)
        assert job is not None and job.status == "done"
        messages = await second.runtime.messages(session)
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
    write_config: WriteConfig,
) -> None:
    from habakkuk.widgets.question_prompt import QuestionPrompt

    write_config(mock_config(CLARIFY_SCRIPT, mode="ask"))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "paint it")
        question = app.screen.query_one(QuestionPrompt)
        await wait_until(pilot, lambda: question.current is not None, "the question")
        shown = str(question.content)
        assert "Which colour?" in shown and "a) red" in shown and "b) blue" in shown
        assert app.screen.focused is app.screen.query_one(Composer)
        await pilot.press("b", "enter")
        assert await turn_finished(pilot) == "done"
        assert question.current is None
        messages = await app.runtime.messages(app.get_chat().session_id)
        result = messages[2].message.tool_results[0]
        assert not result.is_error and result.text == "the user answered:\nb"
        # The answer is not sent as a message of its own.
        assert [u.text for u in app.screen.query(UserMessage)] == ["paint it"]


async def test_a_stopped_turn_withdraws_its_question(write_config: WriteConfig) -> None:
    from habakkuk.widgets.question_prompt import QuestionPrompt

    write_config(mock_config(CLARIFY_SCRIPT, mode="ask"))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "paint it")
        question = app.screen.query_one(QuestionPrompt)
        await wait_until(pilot, lambda: question.current is not None, "the question")
        await pilot.press("ctrl+c")
        assert await turn_finished(pilot) == "stopped"
        await wait_until(pilot, lambda: question.current is None, "the question withdrawn")
        assert app.runtime.approvals.questions == []
