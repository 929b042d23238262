"""/goal: a standing goal prompted again after each turn until a reply says GOAL DONE or
GOAL BLOCKED or its turns are spent (services/goals.py), from `habakkuk run`'s surface and
through the goals service; the chat surfaces are in test_goal_surfaces.py."""

from __future__ import annotations

import itertools
import textwrap

import pytest

from habakkuk.conversation.commands import dispatch
from habakkuk.conversation.run import RunConversation
from habakkuk.engine.agent.requests import TURN_KIND, ReplyTo, turn_request
from habakkuk.engine.events import GoalChanged
from habakkuk.engine.goals import first_prompt, follow_up_id, verdict
from habakkuk.engine.jobs import Job
from habakkuk.runtime import Runtime
from tests.conftest import OpenRuntime, mock_config
from tests.helpers import eventually

# The mock model answers by the turn number the goal's prompt names.
DONE_AT_3 = """
- match: "turn 3 of"
  steps: ["all three parts are written. GOAL DONE"]
- steps: ["part written, more to go"]
"""
BLOCKED_AT_2 = """
- match: "turn 2 of"
  steps: ["I need the database password to go on. GOAL BLOCKED"]
- steps: ["part written, more to go"]
"""
NEVER_DONE = """
- steps: ["part written, more to go"]
"""


def scenarios(script: str) -> str:
    """A mock config whose script is a list of scenarios (mock_config takes steps)."""
    body = textwrap.indent(textwrap.dedent(script).strip(), "      ")
    return (
        "providers:\n  mock:\n    type: mock\n    script:\n"
        + body
        + "\nagents:\n  main:\n    model: mock/scripted\n    mode: full\n"
    )


async def turns_of(runtime: Runtime, session: str) -> list[Job]:
    rows = await runtime.queue.db.fetchall(
        "SELECT * FROM jobs WHERE serial_key = ? AND kind = ? ORDER BY seq", (session, TURN_KIND)
    )
    return [Job.from_row(row) for row in rows]


async def run_goal(
    runtime_factory: OpenRuntime, script: str, command: str
) -> tuple[Runtime, RunConversation, str]:
    runtime = await runtime_factory(scenarios(script))
    conv = RunConversation(runtime, None, None)
    reply = await dispatch(command, conv)
    assert reply is not None and not reply.error, reply
    assert conv.session_id is not None
    return runtime, conv, reply.text


async def test_a_goal_is_prompted_again_after_each_turn_until_a_reply_says_goal_done(
    runtime_factory: OpenRuntime,
) -> None:
    runtime, conv, said = await run_goal(
        runtime_factory, DONE_AT_3, "/goal --turns 5 write the report"
    )
    assert conv.session_id is not None
    goal = await runtime.goals.current(conv.session_id)
    assert goal is not None and (goal.status, goal.counted, goal.budget) == ("done", 3, 5)
    turns = await turns_of(runtime, conv.session_id)
    assert [job.status for job in turns] == ["done", "done", "done"]
    # Each follow-up's id is derived from the turn before it, and was queued after it ended.
    for before, after in itertools.pairwise(turns):
        assert after.id == follow_up_id(before.id)
        assert after.created_at >= before.updated_at
    # `habakkuk run` prints each turn's reply, then how the goal ended.
    assert said.split("\n\n") == [
        "part written, more to go",
        "part written, more to go",
        "all three parts are written. GOAL DONE",
        "Goal reached after 3 of 5 turns: write the report",
    ]
    # The model is told the goal and the convention in the goal's own prompts.
    messages = await runtime.sessions.messages(conv.session_id)
    asked = [m.message.text for m in messages if m.message.role == "user"]
    assert asked[0].startswith("write the report\n\n[standing goal, turn 1 of 5 (4 more turns")
    assert "turn 3 of 5" in asked[2] and "GOAL DONE" in asked[2] and "GOAL BLOCKED" in asked[2]
    shown = await dispatch("/goal", conv)
    assert shown is not None and shown.text == (
        "No goal is running. The last one: Goal reached after 3 of 5 turns: write the report"
    )


async def test_a_reply_saying_goal_blocked_ends_the_goal_and_says_so(
    runtime_factory: OpenRuntime,
) -> None:
    runtime, conv, said = await run_goal(runtime_factory, BLOCKED_AT_2, "/goal migrate the data")
    assert conv.session_id is not None
    goal = await runtime.goals.current(conv.session_id)
    assert goal is not None and (goal.status, goal.counted, goal.budget) == ("blocked", 2, 10)
    assert len(await turns_of(runtime, conv.session_id)) == 2
    assert said.endswith("Goal blocked after 2 of 10 turns (the reply says why): migrate the data")


async def test_a_goal_that_never_says_done_ends_when_its_turns_are_spent(
    runtime_factory: OpenRuntime,
) -> None:
    runtime, conv, said = await run_goal(runtime_factory, NEVER_DONE, "/goal --turns=3 tidy up")
    assert conv.session_id is not None
    goal = await runtime.goals.current(conv.session_id)
    assert goal is not None and (goal.status, goal.counted) == ("spent", 3)
    assert len(await turns_of(runtime, conv.session_id)) == 3  # the first one counted too
    assert said.endswith("Goal not reached: its 3 turns are spent: tidy up")


async def test_goal_clear_ends_the_goal_and_no_follow_up_is_queued_after_it(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(scenarios(NEVER_DONE))
    session = await runtime.sessions.new_session(None, origin="cli")
    goal = await runtime.goals.begin(session.id, "tidy up", 5)
    first = await runtime.turns.submit(session.id, first_prompt(goal))
    conv = RunConversation(runtime, session.id, None)
    running = await dispatch("/goal", conv)
    assert running is not None and running.text == (
        "Goal: tidy up (0 of 5 turns so far). /goal clear ends it."
    )
    cleared = await dispatch("/goal clear", conv)
    assert cleared is not None and cleared.text == (
        "Goal cleared after 0 of 5 turns: no further turn is queued for it."
    )
    runtime.start_workers(channels=False)  # the turn queued before the clear runs now
    assert (await runtime.turns.wait_turn(first)).status == "done"
    await runtime.goals.settled()
    assert [job.id for job in await turns_of(runtime, session.id)] == [first]
    again = await dispatch("/goal clear", conv)
    assert again is not None and again.text == "No goal is running here."


async def test_taking_a_step_again_counts_no_turn_twice_and_queues_one_follow_up(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(scenarios(NEVER_DONE))
    session = await runtime.sessions.new_session(None, origin="cli")
    goal = await runtime.goals.begin(session.id, "tidy up", 5)
    first = await runtime.turns.submit(session.id, first_prompt(goal))
    runtime.start_workers(channels=False)
    await runtime.turns.wait_turn(first)
    follow_up = follow_up_id(first)

    async def queued() -> bool:
        return await runtime.queue.get(follow_up) is not None

    await eventually(queued, what="the follow-up")
    await runtime.turns.wait_turn(follow_up)
    await runtime.goals.settled()
    # The steps after the first turn taken again, as after a crash: nothing doubles.
    finished = await runtime.queue.get(first)
    assert finished is not None
    await runtime.goals.step(finished)
    await runtime.goals.recover()
    await runtime.goals.recover()
    await runtime.goals.settled()
    goal_now = await runtime.goals.current(session.id)
    assert goal_now is not None and goal_now.counted >= 2
    counted = await runtime.goals.store.counted_turns(goal.id)
    assert len(counted) == len(set(counted)) == goal_now.counted
    turns = await turns_of(runtime, session.id)
    assert len({job.id for job in turns}) == len(turns)
    assert [job.id for job in turns[:2]] == [first, follow_up]
    await runtime.goals.clear(session.id)


async def test_a_step_a_crash_cut_short_is_taken_by_recover_once(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(scenarios(NEVER_DONE))
    runtime.start_workers(channels=False)
    await runtime.goals.settled()  # the start's own recover: no goal yet
    session = await runtime.sessions.new_session(None, origin="cli")
    goal = await runtime.goals.begin(session.id, "tidy up", 5)
    # The turn finishes, then the process dies before its step: counted by nobody.
    runtime.goals.turn_finished = lambda job: None  # type: ignore[method-assign]  # the crash
    first = await runtime.turns.submit(session.id, first_prompt(goal))
    await runtime.turns.wait_turn(first)
    uncounted = await runtime.goals.current(session.id)
    assert uncounted is not None and uncounted.counted == 0
    await runtime.goals.recover()
    goal_now = await runtime.goals.current(session.id)
    assert goal_now is not None and (goal_now.counted, goal_now.last_turn) == (1, first)
    await runtime.goals.recover()  # taken twice: the turn is not counted again
    await runtime.turns.wait_turn(follow_up_id(first))
    await runtime.goals.clear(session.id)
    counted = await runtime.goals.store.counted_turns(goal.id)
    assert counted[0] == first and len(counted) == len(set(counted))
    turns = [job.id for job in await turns_of(runtime, session.id)]
    assert turns == [first, *(follow_up_id(turn) for turn in turns[:-1])]


async def test_no_follow_up_is_queued_while_another_turn_of_the_session_waits(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(scenarios(NEVER_DONE))
    session = await runtime.sessions.new_session(None, origin="cli")
    goal = await runtime.goals.begin(session.id, "tidy up", 5)
    first = await runtime.turns.submit(session.id, first_prompt(goal))
    typed = await runtime.turns.submit(session.id, "and mind the tests")  # the user's, meanwhile

    async def finish(turn: str) -> Job:
        """Run `turn` as a worker would (claimed, replied, settled) and take its step."""
        lease = await runtime.queue.claim([TURN_KIND])
        assert lease is not None and lease.job.id == turn
        await runtime.queue.complete(lease, {"reply": "part written, more to go"})
        await runtime.goals.step(lease.job)
        done = await runtime.queue.get(turn)
        assert done is not None
        return done

    await finish(first)
    # The typed turn waits: the first turn's end queues nothing; the typed one's end will.
    assert await runtime.queue.get(follow_up_id(first)) is None
    await finish(typed)
    goal_now = await runtime.goals.current(session.id)
    assert goal_now is not None and (goal_now.counted, goal_now.last_turn) == (2, typed)
    assert [job.id for job in await turns_of(runtime, session.id)] == [
        first,
        typed,
        follow_up_id(typed),
    ]
    # Steps taken late, or twice, in any order, queue nothing more.
    for turn in (first, typed, first):
        job = await runtime.queue.get(turn)
        assert job is not None
        await runtime.goals.step(job)
    await runtime.goals.recover()
    assert len(await turns_of(runtime, session.id)) == 3


BAD_TURNS = "give a whole number of turns from 1 to 100"
USAGE = "/goal [--turns N] TEXT sets a standing goal; /goal alone shows it, /goal clear ends it."


@pytest.mark.parametrize(
    ("command", "error"),
    [
        ("/goal --turns 0 tidy", f"/goal: --turns 0: {BAD_TURNS}"),
        ("/goal --turns 101 tidy", f"/goal: --turns 101: {BAD_TURNS}"),
        ("/goal --turns many tidy", f"/goal: --turns many: {BAD_TURNS}"),
        ("/goal --turns", f"/goal: --turns (none): {BAD_TURNS}"),
        ("/goal --turns 3", USAGE),
    ],
)
async def test_a_bad_goal_is_refused_in_one_line_naming_what_is_wrong(
    runtime_factory: OpenRuntime, command: str, error: str
) -> None:
    runtime = await runtime_factory(mock_config())
    reply = await dispatch(command, RunConversation(runtime, None, None))
    assert reply is not None and reply.error and reply.text == error


async def test_goal_alone_says_when_no_goal_was_ever_set(runtime_factory: OpenRuntime) -> None:
    runtime = await runtime_factory(mock_config())
    reply = await dispatch("/goal", RunConversation(runtime, None, None))
    assert (
        reply is not None and reply.text == "No goal is set here. /goal [--turns N] TEXT sets one."
    )


@pytest.mark.parametrize(
    ("reply", "found"),
    [
        ("done. GOAL DONE", "done"),
        ("GOAL BLOCKED: no access", "blocked"),
        ("not GOAL DONE yet; GOAL BLOCKED", "blocked"),
        ("the goal is done", None),
        ("GOAL DONEISH", None),
        # The convention quoted back is no verdict; a marker after it still is.
        ("you asked me to end with GOAL BLOCKED if stuck; working on it", None),
        ("I will end your reply with GOAL DONE... all set. GOAL DONE", "done"),
    ],
)
def test_the_last_marker_a_reply_says_is_its_verdict(reply: str, found: str | None) -> None:
    assert verdict(reply) == found


async def test_stop_on_a_goals_queued_turn_ends_the_goal_and_says_so(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(scenarios(NEVER_DONE))
    session = await runtime.sessions.new_session(None, origin="cli")
    goal = await runtime.goals.begin(session.id, "tidy up", 5)
    first = await runtime.turns.submit(session.id, first_prompt(goal))  # no worker runs it
    with runtime.bus.subscribe(lambda e: isinstance(e, GoalChanged) and bool(e.notice)) as told:
        stopped = await dispatch("/stop", RunConversation(runtime, session.id, None))
        assert stopped is not None and stopped.text == "Stopped."
        await runtime.goals.settled()
        notice = told.get_nowait()
    assert isinstance(notice, GoalChanged)
    assert notice.notice == "Goal stopped after 1 of 5 turns: a turn failed or was stopped: tidy up"
    ended = await runtime.goals.current(session.id)
    assert ended is not None and (ended.status, ended.last_turn, ended.told) == (
        "stopped",
        first,
        True,
    )


async def test_a_turn_carries_its_sessions_running_goal_from_when_it_was_queued(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(scenarios(NEVER_DONE))
    session = await runtime.sessions.new_session(None, origin="cli")
    before = await runtime.turns.submit(session.id, "before the goal")
    goal = await runtime.goals.begin(session.id, "tidy up", 5)
    during = await runtime.turns.submit(session.id, first_prompt(goal))
    await runtime.goals.clear(session.id)
    after = await runtime.turns.submit(session.id, "after it")
    marks = []
    for turn in (before, during, after):
        job = await runtime.queue.get(turn)
        request = turn_request(job) if job is not None else None
        assert request is not None
        marks.append(request.goal)
    assert marks == ["", goal.id, ""]  # only its turns are stepped: the others cost nothing


async def test_a_goal_that_ended_untold_is_told_once_by_recover(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(scenarios(NEVER_DONE))
    session = await runtime.sessions.new_session(None, origin="cli")
    goal = await runtime.goals.begin(session.id, "tidy up", 5)
    chat = ReplyTo("tg:42", "7", "42")
    turn = await runtime.turns.submit(session.id, first_prompt(goal), reply_to=chat)
    lease = await runtime.queue.claim([TURN_KIND])
    assert lease is not None and lease.job.id == turn
    await runtime.queue.complete(lease, {"reply": "done. GOAL DONE"})
    # Counted and ended, then the process died before telling the chat.
    finished = await runtime.queue.get(turn)
    assert finished is not None
    await runtime.goals.store.count(goal.id, turn, "done", queued_at=finished.created_at)
    with runtime.bus.subscribe(lambda e: isinstance(e, GoalChanged) and bool(e.notice)) as told:
        await runtime.goals.recover()
        await runtime.goals.recover()
        notices = [told.get_nowait(), told.get_nowait()]
    assert [n.notice for n in notices if isinstance(n, GoalChanged)] == [
        "Goal reached after 1 of 5 turns: tidy up"
    ]
    rows = await runtime.queue.db.fetchall(
        "SELECT id FROM jobs WHERE id IN (?, ?) ORDER BY seq", (f"reply:{turn}", f"goal:{turn}")
    )
    assert [row[0] for row in rows] == [f"reply:{turn}", f"goal:{turn}"]  # the reply first
    ended = await runtime.goals.current(session.id)
    assert ended is not None and ended.told


async def test_a_turn_counted_late_never_becomes_the_one_followed_up(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(scenarios(NEVER_DONE))
    session = await runtime.sessions.new_session(None, origin="cli")
    goal = await runtime.goals.begin(session.id, "tidy up", 5)
    first = await runtime.turns.submit(session.id, first_prompt(goal))
    typed = await runtime.turns.submit(session.id, "and mind the tests")
    for turn in (first, typed):
        lease = await runtime.queue.claim([TURN_KIND])
        assert lease is not None and lease.job.id == turn
        await runtime.queue.complete(lease, {"reply": "part written, more to go"})
        if turn == typed:  # the first turn's step was lost to a crash; the typed one's ran
            await runtime.goals.step(lease.job)
    await runtime.goals.recover()  # counts the first turn, late
    ended = await runtime.goals.current(session.id)
    assert ended is not None and (ended.counted, ended.last_turn) == (2, typed)
    assert [job.id for job in await turns_of(runtime, session.id)] == [
        first,
        typed,
        follow_up_id(typed),
    ]
