"""The offline demo is a guided tour: approvals, Ctrl+C and questions without a model."""

from __future__ import annotations

from habakkuk.engine.home import Home
from habakkuk.widgets.approval_prompt import ApprovalPrompt
from habakkuk.widgets.question_prompt import QuestionPrompt
from habakkuk.widgets.tool_card import ToolCard
from tests.helpers import eventually
from tests.tui.conftest import make_app, markdown_text, ready, running, runtime_of


async def test_the_demo_tour_walks_through_an_approval_a_stop_and_a_question(home: Home) -> None:
    app = make_app(home)
    async with running(app, wait_ready=False) as ui:
        await eventually(lambda: app.screen.id == "setup", what="the setup screen")
        await ui.press("ctrl+o")
        await ready(ui.pilot)
        assert "model: demo/tour" in home.config_path.read_text()

        await ui.send("hi")
        assert await ui.turn_finished() == "done"
        intro = markdown_text(app)
        assert "Offline demo" in intro and "You said: hi" in intro and "`sleep`" in intro

        # A command asks first; y runs it once.
        await ui.send("run a command")
        prompt = app.screen.query_one(ApprovalPrompt)
        await eventually(lambda: prompt.current is not None, what="the approval prompt")
        assert prompt.current is not None and prompt.current.tool == "exec"
        await ui.press("y")
        assert await ui.turn_finished() == "done"
        card = app.screen.query(ToolCard).last()
        assert card.status == "ok" and "hello from the Habakkuk demo" in card.title

        # A slow command: approve, then Ctrl+C stops the turn at once.
        await ui.send("sleep")
        await eventually(lambda: prompt.current is not None, what="the second approval")
        await ui.press("y")
        await eventually(
            lambda: app.screen.query(ToolCard).last().status == "running", what="the sleep to run"
        )
        await ui.press("ctrl+c")
        assert await ui.turn_finished() == "stopped"

        # Denied, the command did not run, and the tour says so (not "ran to the end").
        await ui.send("sleep")
        await eventually(lambda: prompt.current is not None, what="the third approval")
        await ui.press("n")
        assert await ui.turn_finished() == "done"
        assert app.screen.query(ToolCard).last().status == "denied"
        replies = markdown_text(app)
        assert "You denied the command" in replies and "ran to the end" not in replies

        # A question with lettered choices; the next message answers it.
        await ui.send("ask me something")
        question = app.screen.query_one(QuestionPrompt)
        await eventually(lambda: question.current is not None, what="the question")
        assert "b) green" in str(question.content)
        await ui.press("b", "enter")
        assert await ui.turn_finished() == "done"
        assert "your answer came back to me" in markdown_text(app)


async def test_the_demo_tour_saves_a_memory_note_the_memory_screen_lists(home: Home) -> None:
    app = make_app(home)
    async with running(app, wait_ready=False) as ui:
        await eventually(lambda: app.screen.id == "setup", what="the setup screen")
        await ui.press("ctrl+o")
        await ready(ui.pilot)
        await ui.send("remember that I like tea")
        assert await ui.turn_finished() == "done"
        card = app.screen.query(ToolCard).last()
        assert card.status == "ok"
        assert "Saved." in markdown_text(app)
        assert app.runtime is not None
        notes, total = await runtime_of(app).memory.list_notes("habakkuk")
        assert total == 1 and notes[0].tags == ("demo",)
