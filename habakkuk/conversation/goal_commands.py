"""/goal: a standing goal for the conversation's session (spec 000 "/goal").

`/goal [--turns N] TEXT` sets it (N turns at most, default 10, at most 100, the first
included) and queues its first turn, the goal as its message, the way the surface queues
any message; after each turn the goals service (services/goals.py) queues the next until a
reply says GOAL DONE or GOAL BLOCKED or the turns are spent, and the chat is told which.
`/goal` alone shows the goal and its progress, `/goal clear` ends it.

`habakkuk run --session S "/goal ..."` has no chat to come back to: it runs the goal's
turns to its end in that process and prints each turn's reply, then how the goal ended.
Registered in `COMMANDS` when the package is imported (see __init__).
"""

from __future__ import annotations

from typing import cast

from habakkuk.conversation.commands import Conversation, Reply, command
from habakkuk.engine.goals import (
    DEFAULT_TURNS,
    MAX_TURNS,
    Goal,
    GoalError,
    GoalsAccess,
    first_prompt,
)
from habakkuk.engine.i18n import t


def _goals(conv: Conversation) -> GoalsAccess:
    # The Runtime has one; a surface's own services (a test's) may not.
    found = getattr(conv.services, "goals", None)
    if found is None:
        raise GoalError(t("goal.unavailable"))
    return cast("GoalsAccess", found)


def parse_goal(rest: str) -> tuple[int, str]:
    """`[--turns N] TEXT` as (N, TEXT); GoalError names what is wrong."""
    words = rest.strip()
    budget = DEFAULT_TURNS
    if words.startswith("--turns"):
        option, _, words = words.partition(" ")
        given = option.partition("=")[2] if "=" in option else ""
        if not given:
            given, _, words = words.strip().partition(" ")
        if not given.isdigit() or not 1 <= int(given) <= MAX_TURNS:
            raise GoalError(
                t("goal.bad_turns", given=given or t("errors.goal.no_turns"), most=MAX_TURNS)
            )
        budget = int(given)
    if not words.strip():
        raise GoalError(t("goal.usage"))
    return budget, words.strip()


def _shown(goal: Goal | None) -> str:
    if goal is None:
        return t("goal.none")
    if goal.running:
        return t("goal.running", text=goal.text, counted=goal.counted, budget=goal.budget)
    said = t(f"goal.ended.{goal.status}", counted=goal.counted, budget=goal.budget, text=goal.text)
    return t("goal.last", said=said)


@command("goal", "a standing goal: a turn after each reply until it is done",
         args="[--turns N] TEXT | clear", category="Turn")  # fmt: skip
async def _goal(conv: Conversation, rest: str) -> Reply:
    goals = _goals(conv)
    if not rest.strip():
        session = await conv.session()
        return Reply(_shown(await goals.current(session.id) if session else None))
    if rest.strip().lower() == "clear":
        session = await conv.session()
        cleared = await goals.clear(session.id) if session else None
        if cleared is None:
            return Reply(t("goal.not_running"))
        return Reply(t("goal.cleared", counted=cleared.counted, budget=cleared.budget))
    budget, text = parse_goal(rest)
    session = await conv.session(create=True)
    assert session is not None
    goal = await goals.begin(session.id, text, budget)
    await conv.start_turn(first_prompt(goal))
    if conv.surface == "run":  # no chat to come back to: run it to its end here
        ended = await goals.wait_ended(goal.id)
        said = t(f"goal.ended.{ended.status}", counted=ended.counted, budget=ended.budget,
                 text=ended.text)  # fmt: skip
        return Reply("\n\n".join([*await goals.replies(goal.id), said]))
    return Reply(t("goal.set", count=budget, text=text))
