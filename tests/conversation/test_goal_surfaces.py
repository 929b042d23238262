"""/goal on every surface: Telegram (the fake Bot API), the web chat (POST /api/chat) and
the terminal (Pilot) each get the goal's turns' replies and how the goal ended; a
follow-up's delivery fires message_out like any reply."""

from __future__ import annotations

import textwrap
from pathlib import Path

from habakkuk.engine.goals import follow_up_id
from habakkuk.engine.home import Home
from habakkuk.engine.i18n import t, use_language
from habakkuk.widgets.status_line import Status
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.test_telegram_e2e import channel_yaml
from tests.conversation.test_goal import scenarios
from tests.helpers import eventually
from tests.hook_log import HookLog
from tests.server.conftest import ServeFactory
from tests.tui.conftest import make_app, notices, running, status_text

DONE_AT_2 = """
- match: "turn 2 of"
  steps: ["both parts are done. GOAL DONE"]
- steps: ["part one is done"]
"""
GOAL = "/goal --turns 4 write two parts"
SET = (
    "Goal set, for at most 4 turns: write two parts. After each reply another turn is queued"
    " until a reply says GOAL DONE or GOAL BLOCKED; /goal shows its progress, /goal clear"
    " ends it."
)
ENDED = "Goal reached after 2 of 4 turns: write two parts"
LAST = f"No goal is running. The last one: {ENDED}"


def in_order(texts: list[str], *wanted: str) -> bool:
    """Whether each of `wanted` is among `texts`, in that order."""
    at = -1
    for text in wanted:
        if text not in texts[at + 1 :]:
            return False
        at = texts.index(text, at + 1)
    return True


async def test_a_telegram_goal_runs_to_done_and_its_follow_up_fires_message_out(
    serve: ServeFactory, tg: FakeTelegram, tmp_path: Path
) -> None:
    log = HookLog(tmp_path / "hooks")
    hooks = log.config(log.entry("message_out", "out", "^tg$"))
    config = scenarios(DONE_AT_2) + textwrap.dedent(channel_yaml(tg)) + hooks
    served = await serve(config)
    assert served.runtime.channels is not None
    await served.runtime.channels.started()
    tg.message(GOAL)
    await tg.wait_for(lambda: ENDED in tg.texts())
    assert in_order(tg.texts(), "part one is done", "both parts are done. GOAL DONE", ENDED)
    assert SET in tg.texts()
    tg.message("/goal")
    await tg.wait_for(lambda: tg.texts()[-1] == LAST)
    tg.message("/goal clear")
    await tg.wait_for(lambda: tg.texts()[-1] == "No goal is running here.")

    [session] = [s.id for s in await served.runtime.sessions.list_sessions()]
    goal = await served.runtime.goals.current(session)
    assert goal is not None and goal.status == "done"
    first, follow_up = await served.runtime.goals.store.counted_turns(goal.id)
    assert follow_up == follow_up_id(first)

    async def fired() -> bool:
        return any(e.get("turn") == follow_up for e in log.events("out"))

    await eventually(fired, what="message_out for the follow-up's reply")
    await served.runtime.hooks.drain()
    [out] = [e for e in log.events("out") if e.get("turn") == follow_up]
    assert (out["kind"], out["text"]) == ("reply", "both parts are done. GOAL DONE")
    assert any(e["text"] == ENDED for e in log.events("out"))  # the notice went out too


async def test_a_french_chat_is_told_in_french_how_its_goal_ended(
    serve: ServeFactory, tg: FakeTelegram
) -> None:
    config = scenarios(DONE_AT_2) + textwrap.dedent(channel_yaml(tg, "language: fr\n"))
    served = await serve(config)
    assert served.runtime.channels is not None
    await served.runtime.channels.started()
    with use_language("fr"):
        ended = t("goal.ended.done", counted=2, budget=4, text="write two parts")
    assert ended != ENDED  # the French catalog has its own words for it
    tg.message(GOAL)
    await tg.wait_for(lambda: ended in tg.texts())
    assert ENDED not in tg.texts()


async def test_a_web_chat_goal_runs_to_done_in_its_conversation(serve: ServeFactory) -> None:
    served = await serve(scenarios(DONE_AT_2))
    sent = await served.post_json("/api/chat", {"conversation": "g", "text": GOAL})
    assert sent["message"] == SET
    store = served.server.web_store()

    async def texts() -> list[str]:
        return [event.text for event in await store.events("g")]

    async def ended() -> bool:
        return ENDED in await texts()

    await eventually(ended, what="the goal's end in the web chat")
    assert in_order(await texts(), "part one is done", "both parts are done. GOAL DONE", ENDED)
    shown = await served.post_json("/api/chat", {"conversation": "g", "text": "/goal"})
    assert shown["message"] == LAST
    overview = await served.get_json("/api/overview")
    assert overview["goals"] == []


async def test_the_terminal_shows_a_goals_progress_and_how_it_ended(tmp_path: Path) -> None:
    home = Home(tmp_path / "terminal")
    home.prepare()
    home.config_path.write_text(scenarios(DONE_AT_2), encoding="utf-8")
    app = make_app(home)
    async with running(app, size=(120, 40)) as ui:
        await ui.send(GOAL)
        await eventually(lambda: ENDED in notices(app), what="the goal's end noted")
        assert SET in notices(app)
        assert "goal " not in status_text(app)  # it ended: the status line no longer shows it
        runtime = ui.runtime
        session = ui.chat.session_id
        goal = await runtime.goals.current(session)
        assert goal is not None and (goal.status, goal.counted) == ("done", 2)
        # A session with a running goal shows it on the status line when it is opened.
        await runtime.goals.begin(session, "write a third part", 5)
        await ui.chat.open_session(session).wait()
        await eventually(lambda: "goal 0/5" in status_text(app), what="the goal's progress")
        overview = await runtime.control.overview()
        assert [(g.session, g.text) for g in overview.goals] == [(session, "write a third part")]
        await ui.send("/goal clear")
        await eventually(lambda: "goal 0/5" not in status_text(app), what="the goal cleared")


def test_the_status_line_shows_a_running_goal_before_the_run_state() -> None:
    parts = [text for text, _ in Status(agent="main", goal="goal 3/10", running=True).parts()]
    assert parts[-2:] == ["goal 3/10", "running"]
