"""The offline demo is a guided tour: approvals, Ctrl+C and questions without a model."""

from __future__ import annotations

from habakkuk.engine.home import Home
from habakkuk.widgets.approval_prompt import ApprovalPrompt
from habakkuk.widgets.question_prompt import QuestionPrompt
from habakkuk.widgets.tool_card import ToolCard
from tests.tui.conftest import make_app, markdown_text, ready, send, turn_finished, wait_until


async def test_the_demo_tour_walks_through_an_approval_a_stop_and_a_question(home: Home) -> None:
    app = make_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.screen.id == "setup", "the setup screen")
        await pilot.press("ctrl+o")
        await ready(pilot)
        assert "model: demo/tour" in home.config_path.read_text()

        await send(pilot, "hi")
        assert await turn_finished(pilot) == "done"
        intro = markdown_text(app)
        assert "Offline demo" in intro and "You said: hi" in intro and "`sleep`" in intro

        # A command asks first; y runs it once.
        await send(pilot, "run a command")
        prompt = app.screen.query_one(ApprovalPrompt)
        await wait_until(pilot, lambda: prompt.current is not None, "the approval prompt")
        assert prompt.current.tool == "exec"
        await pilot.press("y")
        assert await turn_finished(pilot) == "done"
        card = app.screen.query(ToolCard).last()
        assert card.status == "ok" and "hello from the Habakkuk demo" in card.title

        # A slow command: approve, then Ctrl+C stops the turn at once.
        await send(pilot, "sleep")
        await wait_until(pilot, lambda: prompt.current is not None, "the second approval")
        await pilot.press("y")
        await wait_until(
            pilot,
            lambda: app.screen.query(ToolCard).last().status == "running",
            "the sleep to run",
        )
        await pilot.press("ctrl+c")
        assert await turn_finished(pilot) == "stopped"

        # Denied, the command did not run, and the tour says so (not "ran to the end").
        await send(pilot, "sleep")
        await wait_until(pilot, lambda: prompt.current is not None, "the third approval")
        await pilot.press("n")
        assert await turn_finished(pilot) == "done"
        assert app.screen.query(ToolCard).last().status == "denied"
        replies = markdown_text(app)
        assert "You denied the command" in replies and "ran to the end" not in replies

        # A question with lettered choices; the next message answers it.
        await send(pilot, "ask me something")
        question = app.screen.query_one(QuestionPrompt)
        await wait_until(pilot, lambda: question.current is not None, "the question")
        assert "b) green" in str(question.content)
        await pilot.press("b", "enter")
        assert await turn_finished(pilot) == "done"
        assert "your answer came back to me" in markdown_text(app)
