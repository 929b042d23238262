"""A session's standing goal (/goal): its row in state.db and the rules of its steps.

A goal is a text the agent keeps working toward, turn after turn, with a budget of turns
(the first one, which /goal queues itself, included). Each turn of the session that
finishes while the goal runs is counted once (`goal_turns`: one row per counted turn, so
a rerun or a crash never counts a turn twice); its reply ends the goal when it says GOAL
DONE or GOAL BLOCKED, the budget ends it when it is spent, else a follow-up turn is queued
with an id derived from the finished turn (`follow_up_id`), so the same step taken twice
queues one turn. The service that takes the steps is habakkuk.services.goals.Goals; its
Protocol, what the commands and the surfaces use of it, is `GoalsAccess` below.

The words the model reads (the goal, the turns left, the convention) are in the goal's own
prompts (`first_prompt`, `follow_up_prompt`), not in the frozen system prompt, so setting
or ending a goal never changes the cached prefix. They stay English: GOAL DONE and GOAL
BLOCKED are the markers the step looks for, whatever language the chat speaks.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from .errors import HabakkukError
from .i18n import t
from .sql import Conn, Row
from .store import Database

GoalStatus = Literal["running", "done", "blocked", "spent", "cleared", "stopped"]
GOAL_STATUSES: tuple[GoalStatus, ...] = (
    "running",
    "done",
    "blocked",
    "spent",
    "cleared",
    "stopped",
)
DEFAULT_TURNS = 10
MAX_TURNS = 100
DONE_MARK = "GOAL DONE"
BLOCKED_MARK = "GOAL BLOCKED"
_MARKS = re.compile(r"\bGOAL (DONE|BLOCKED)\b")
_QUOTED_CONVENTION = re.compile(r"end (?:your reply )?with GOAL (?:DONE|BLOCKED)")

# state.db's tables (migration 4 on SQLite, 2 on PostgreSQL: engine/state.py lists them).
# One running goal per session (the partial unique index): setting another clears it.
GOALS_DDL = """
    CREATE TABLE goals (
        id TEXT PRIMARY KEY,
        session TEXT NOT NULL,
        text TEXT NOT NULL,
        budget INTEGER NOT NULL,
        counted INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL,
        since {real} NOT NULL,
        last_turn TEXT NOT NULL DEFAULT '',
        last_at {real} NOT NULL DEFAULT 0,
        told INTEGER NOT NULL DEFAULT 0,
        created_at {real} NOT NULL,
        updated_at {real} NOT NULL
    );
    CREATE UNIQUE INDEX goals_running ON goals(session) WHERE status = 'running';
    CREATE INDEX goals_session ON goals(session, created_at);
    CREATE TABLE goal_turns (
        goal TEXT NOT NULL,
        turn TEXT NOT NULL,
        queued_at {real} NOT NULL,
        counted_at {real} NOT NULL,
        PRIMARY KEY (goal, turn)
    );
"""


class GoalError(HabakkukError):
    """A /goal request that cannot be carried out (one line for the user)."""


@dataclass(frozen=True)
class Goal:
    """One goal of a session. `since`: turns of the session queued from then on count;
    `last_turn`: the last one counted ("" before the first); `told`: the chat was told
    how it ended."""

    id: str
    session: str
    text: str
    budget: int
    counted: int
    status: GoalStatus
    since: float
    last_turn: str = ""
    last_at: float = 0.0  # when the last turn was queued
    told: bool = False
    updated_at: float = 0.0

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def left(self) -> int:
        """Turns the budget still allows."""
        return max(0, self.budget - self.counted)


@dataclass(frozen=True)
class Counted:
    """What counting a turn did: the goal after it, and whether the turn was new to it
    (False: counted before, by an earlier run of the same step, or the goal had ended)."""

    goal: Goal
    new: bool


def verdict(reply: str) -> GoalStatus | None:
    """ "done" or "blocked" when the reply says GOAL DONE or GOAL BLOCKED (the last one it
    says wins: "not GOAL DONE yet ... GOAL BLOCKED"), else None."""
    # The convention's own words quoted back ("... end with GOAL BLOCKED") are no verdict.
    found = _MARKS.findall(_QUOTED_CONVENTION.sub("", reply))
    if not found:
        return None
    return "done" if found[-1] == "DONE" else "blocked"


def follow_up_id(turn: str) -> str:
    """The id of the follow-up of finished turn `turn`: derived from it (a step taken twice
    queues one turn), of one length however long the goal runs."""
    return "turn_goal_" + hashlib.sha256(turn.encode("utf-8")).hexdigest()[:20]


def _convention(goal: Goal, number: int) -> str:
    left = goal.budget - number
    more = f"{left} more turn{'s' if left != 1 else ''} after this one" if left else "the last turn"
    return (
        f"[standing goal, turn {number} of {goal.budget} ({more}): {goal.text}\n"
        f"When the goal is reached, end your reply with {DONE_MARK}. If you cannot go on "
        f"without the user, say why and end with {BLOCKED_MARK}. Otherwise keep working: "
        "you will be prompted again after this turn.]"
    )


def progress(goal: Goal | None) -> str:
    """The status line's words for the session's goal ("goal 3/10"; "" unless it runs)."""
    if goal is None or not goal.running:
        return ""
    return t("goal.status", counted=goal.counted, budget=goal.budget)


def first_prompt(goal: Goal) -> str:
    """The message of the goal's first turn: the goal, then the convention."""
    return f"{goal.text}\n\n{_convention(goal, 1)}"


def follow_up_prompt(goal: Goal) -> str:
    """The message of the turn after `goal.counted` counted ones."""
    return f"Continue toward the goal.\n\n{_convention(goal, goal.counted + 1)}"


class GoalsAccess(Protocol):
    """The goals service (habakkuk.services.goals.Goals) as the commands and the surfaces
    use it."""

    async def current(self, session: str) -> Goal | None:
        """The session's running goal, else its latest one (None when it never had one)."""
        ...

    async def begin(self, session: str, text: str, budget: int) -> Goal:
        """Set the session's goal (a running one is cleared); the caller queues its
        first turn with `first_prompt`."""
        ...

    async def clear(self, session: str) -> Goal | None:
        """End the session's running goal; None when none runs."""
        ...

    async def running(self) -> list[Goal]:
        """Every running goal of the home (the overview)."""
        ...

    async def wait_ended(self, goal_id: str) -> Goal:
        """Wait until the goal no longer runs; the goal as it ended."""
        ...

    async def replies(self, goal_id: str) -> list[str]:
        """The replies of the turns counted toward the goal, in order."""
        ...


# -- the store ------------------------------------------------------------------------------

_COLUMNS = "id, session, text, budget, counted, status, since, last_turn, last_at, told, updated_at"


def _goal(row: Row) -> Goal:
    status = str(row["status"])
    return Goal(
        str(row["id"]),
        str(row["session"]),
        str(row["text"]),
        int(row["budget"]),
        int(row["counted"]),
        next((s for s in GOAL_STATUSES if s == status), "stopped"),
        float(row["since"]),
        str(row["last_turn"]),
        float(row["last_at"]),
        bool(row["told"]),
        float(row["updated_at"]),
    )


def running_goal_in(conn: Conn, session: str, schema: str) -> str:
    """The id of the session's running goal ("" for none), read on `conn` where state.db
    is `schema` (attached to the transaction that queues a turn, as "state")."""
    if not schema.isidentifier():
        raise ValueError(f"bad schema name {schema!r}")
    row = conn.execute(
        f"SELECT id FROM {schema}.goals WHERE session = ? AND status = 'running'", (session,)
    ).fetchone()
    return str(row[0]) if row is not None else ""


def _running_in(conn: Conn, session: str) -> Goal | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM goals WHERE session = ? AND status = 'running'", (session,)
    ).fetchone()
    return _goal(row) if row is not None else None


class GoalStore:
    """The goals' rows in state.db (opened by the runtime as StateStore.db)."""

    def __init__(self, db: Database):
        self.db = db

    async def current(self, session: str) -> Goal | None:
        """The running goal of the session, else its latest."""
        row = await self.db.fetchone(
            f"SELECT {_COLUMNS} FROM goals WHERE session = ?"
            " ORDER BY status = 'running' DESC, created_at DESC LIMIT 1",
            (session,),
        )
        return _goal(row) if row is not None else None

    async def running(self) -> list[Goal]:
        """Every running goal, oldest first."""
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM goals WHERE status = 'running' ORDER BY created_at", ()
        )
        return [_goal(row) for row in rows]

    async def untold(self) -> list[Goal]:
        """Goals that ended by themselves (done, blocked, spent, stopped) and whose chat
        was not told yet (a crash between the end and the telling)."""
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM goals WHERE told = 0"
            " AND status IN ('done', 'blocked', 'spent', 'stopped') ORDER BY created_at",
            (),
        )
        return [_goal(row) for row in rows]

    async def begin(self, goal_id: str, session: str, text: str, budget: int) -> Goal:
        """Insert a running goal, clearing the session's running one in the same
        transaction."""
        now = time.time()
        goal = Goal(goal_id, session, text, budget, 0, "running", now, updated_at=now)

        def _begin(conn: Conn) -> None:
            conn.execute(
                "UPDATE goals SET status = 'cleared', told = 1, updated_at = ?"
                " WHERE session = ? AND status = 'running'",
                (now, session),
            )
            conn.execute(
                "INSERT INTO goals(id, session, text, budget, counted, status, since,"
                " last_turn, told, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, 0, 'running', ?, '', 0, ?, ?)",
                (goal_id, session, text, budget, now, now, now),
            )

        await self.db.write(_begin, keys=(f"session:{session}",))
        return goal

    async def clear(self, session: str) -> Goal | None:
        """End the session's running goal as cleared (nothing to tell: the user did it)."""
        now = time.time()

        def _clear(conn: Conn) -> Goal | None:
            goal = _running_in(conn, session)
            if goal is None:
                return None
            conn.execute(
                "UPDATE goals SET status = 'cleared', told = 1, updated_at = ? WHERE id = ?",
                (now, goal.id),
            )
            return replace(goal, status="cleared", told=True, updated_at=now)

        return await self.db.write(_clear, keys=(f"session:{session}",))

    async def count(
        self, goal_id: str, turn: str, outcome: GoalStatus | None, *, queued_at: float
    ) -> Counted:
        """Count finished turn `turn` (queued at `queued_at`) toward the goal, once, and
        settle the goal's status in the same transaction: `outcome` ("done", "blocked",
        "stopped") ends it, else the budget does when this turn spends it. It becomes the
        goal's last turn unless a turn queued after it was counted first (a step a crash
        cut short, taken again late): a follow-up only ever comes from the newest."""
        now = time.time()

        def _count(conn: Conn) -> Counted:
            row = conn.execute(f"SELECT {_COLUMNS} FROM goals WHERE id = ?", (goal_id,)).fetchone()
            if row is None:
                raise GoalError(f"goal {goal_id} not found")
            goal = _goal(row)
            if not goal.running:
                return Counted(goal, False)
            added = conn.execute(
                "INSERT INTO goal_turns(goal, turn, queued_at, counted_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (goal, turn) DO NOTHING",
                (goal_id, turn, queued_at, now),
            )
            if added.rowcount != 1:
                return Counted(goal, False)
            counted = goal.counted + 1
            status: GoalStatus = outcome or ("spent" if counted >= goal.budget else "running")
            newest = queued_at >= goal.last_at
            last, last_at = (turn, queued_at) if newest else (goal.last_turn, goal.last_at)
            conn.execute(
                "UPDATE goals SET counted = ?, status = ?, last_turn = ?, last_at = ?,"
                " updated_at = ? WHERE id = ?",
                (counted, status, last, last_at, now, goal_id),
            )
            return Counted(
                replace(
                    goal,
                    counted=counted,
                    status=status,
                    last_turn=last,
                    last_at=last_at,
                    updated_at=now,
                ),
                True,
            )

        return await self.db.write(_count)

    async def get(self, goal_id: str) -> Goal | None:
        """The goal `goal_id` (None when there is none)."""
        row = await self.db.fetchone(f"SELECT {_COLUMNS} FROM goals WHERE id = ?", (goal_id,))
        return _goal(row) if row is not None else None

    async def counted_turns(self, goal_id: str) -> list[str]:
        """The ids of the turns counted toward the goal, in the order they were queued."""
        rows = await self.db.fetchall(
            "SELECT turn FROM goal_turns WHERE goal = ? ORDER BY queued_at, turn", (goal_id,)
        )
        return [str(row[0]) for row in rows]

    async def mark_told(self, goal_id: str) -> None:
        """Note that the goal's chat was told how it ended."""

        def _told(conn: Conn) -> None:
            conn.execute("UPDATE goals SET told = 1 WHERE id = ?", (goal_id,))

        await self.db.write(_told)
