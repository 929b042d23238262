"""/steer's guidance: words for a running turn, kept in state.db until a turn takes them.

`/steer TEXT` adds a row (`add_in`) in the same transaction that finds the session's turn
queued or running; with none, the surface sends TEXT as an ordinary message instead. The
turn loop takes the session's pending rows (`take_in`) in the transaction that appends
a tool batch's results, as context blocks of that message (`guidance_blocks`), so they
reach the very next model call. Rows left when a turn ends become one follow-up turn
(`follow_up_in`) in the transaction that finishes the turn, its job id derived from the
finished turn, so a crash or a rerun never doubles it. A turn that opens takes what a
stopped or failed turn left (and what a board card's run left: its handler settles the
job, so no follow-up is queued for it). `Steering` is the turn loop's use of all this.

Every function here runs on the caller's connection (transcripts.db's, with state.db and
control.db attached: one SQLite trip, one PostgreSQL transaction). On SQLite in WAL mode
a transaction over attached files is atomic per file, not across them: a crash inside the
commit can keep the transcript's copy (and control.db's follow-up job: SQLite commits
the main file, then the attached ones in order) while state.db still calls the row
pending. The block's kind names the row's id (a follow-up's message carries an empty
block of that kind per row), so `take_in` finds such a row in the transcript and marks
it taken without adding it twice.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, replace
from typing import Any

from ..jobs import Lease, complete_in, enqueue_in, jobs_table, on_postgres
from ..llm.types import ContextBlock, Message
from ..sql import Conn
from .requests import TURN_KIND, TurnRequest

# A guidance block's kind is this prefix and the row's id.
KIND_PREFIX = "guidance:"
# The words the model reads before the user's guidance.
LEAD = "[the user's guidance, sent while you were working: take it into account now]\n"
# The follow-up turn of a finished turn: its id is the finished turn's and this suffix.
FOLLOW_UP_SUFFIX = ":steer"
# Attempts of a follow-up turn (the turns service's TURN_MAX_ATTEMPTS).
FOLLOW_UP_ATTEMPTS = 3


@dataclass(frozen=True)
class Guidance:
    """One pending piece of guidance."""

    id: str
    text: str


def new_guidance_id() -> str:
    """A random id (gd_ and 16 hex digits)."""
    return f"gd_{secrets.token_hex(8)}"


def _table(schema: str) -> str:
    if not schema.isidentifier():
        raise ValueError(f"bad schema name {schema!r}")
    return "guidance" if schema == "main" else f"{schema}.guidance"


# A compaction is a job of kind turn too (TurnRequest.compact): it takes no guidance, so
# it does not count as the session's turn (/steer beside it is a message, queued after).
_NOT_COMPACTION = {
    False: "json_extract(payload, '$.compact') IS NULL",
    True: "(payload::jsonb ->> 'compact') IS NULL",
}


def active_turn_in(conn: Conn, session: str, control: str = "control") -> bool:
    """Whether the session has a turn queued or running, a compaction aside (control.db
    attached as `control`)."""
    row = conn.execute(
        f"SELECT 1 FROM {jobs_table(control)} WHERE serial_key = ? AND serial_key != ''"
        " AND status IN ('queued', 'running') AND kind = 'turn'"
        f" AND {_NOT_COMPACTION[on_postgres(conn)]} LIMIT 1",
        (session,),
    ).fetchone()
    return row is not None


def add_in(conn: Conn, session: str, text: str, schema: str = "state") -> str:
    """Add pending guidance for the session's turn; its id."""
    gid = new_guidance_id()
    conn.execute(
        f"INSERT INTO {_table(schema)}(id, session, text, taken_by, created_at)"
        " VALUES (?, ?, ?, '', ?)",
        (gid, session, text, time.time()),
    )
    return gid


def take_in(conn: Conn, session: str, by: str, schema: str = "state") -> list[Guidance]:
    """The session's pending guidance, oldest first, marked taken by `by` (a turn id);
    a row the transcript already holds (see the module docstring) is marked, not
    returned."""
    table = _table(schema)
    rows = conn.execute(
        f"SELECT id, text FROM {table} WHERE session = ? AND taken_by = '' ORDER BY created_at, id",
        (session,),
    ).fetchall()
    if not rows:
        return []
    found = [Guidance(str(r[0]), str(r[1])) for r in rows]
    conn.execute(
        f"UPDATE {table} SET taken_by = ? WHERE session = ? AND taken_by = ''"
        f" AND id IN ({', '.join('?' for _ in found)})",
        (by, session, *(g.id for g in found)),
    )
    return [g for g in found if not _in_transcript(conn, session, g.id)]


def opens_with_guidance(conn: Conn, session: str, turn: str, schema: str = "state") -> bool:
    """Whether the opening turn takes pending guidance into its message: some is pending,
    the turn is no follow-up (whose message is the guidance) and its message is not
    written yet (a resumed turn keeps the message it has)."""
    if turn.endswith(FOLLOW_UP_SUFFIX):
        return False
    pending = conn.execute(
        f"SELECT 1 FROM {_table(schema)} WHERE session = ? AND taken_by = '' LIMIT 1", (session,)
    ).fetchone()
    if pending is None:
        return False
    opened = conn.execute(
        "SELECT 1 FROM messages WHERE session_id = ? AND turn_id = ? AND role = 'user' LIMIT 1",
        (session, turn),
    ).fetchone()
    return opened is None


def _in_transcript(conn: Conn, session: str, gid: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM messages WHERE session_id = ? AND blocks LIKE ? LIMIT 1",
        (session, f"%{KIND_PREFIX}{gid}%"),
    ).fetchone()
    return row is not None


def guidance_blocks(taken: list[Guidance]) -> list[ContextBlock]:
    """The context blocks the model reads, one per piece of guidance."""
    return [ContextBlock(LEAD + g.text, KIND_PREFIX + g.id) for g in taken]


def is_guidance(block: object) -> bool:
    """Whether `block` is a piece of the user's /steer guidance."""
    return isinstance(block, ContextBlock) and block.kind.startswith(KIND_PREFIX)


def follow_up_id(turn: str) -> str:
    """The id of the follow-up turn of `turn` (one per finished turn)."""
    return turn + FOLLOW_UP_SUFFIX


def follow_up_in(
    conn: Conn,
    session: str,
    turn: str,
    finished: TurnRequest,
    *,
    agent: str,
    schema: str = "state",
    control: str = "control",
) -> str | None:
    """Queue what guidance the finished `turn` left as one follow-up turn of the session
    with the finished request's reply address, so a chat gets its reply. Its id derives
    from `turn`: a rerun finds it queued and adds nothing. None when nothing was left."""
    followed = follow_up_id(turn)
    taken = take_in(conn, session, followed, schema)
    if not taken:
        return None
    # The finished turn's node: a turn the terminal runs here is followed up here.
    row = conn.execute(f"SELECT node FROM {jobs_table(control)} WHERE id = ?", (turn,)).fetchone()
    node = str(row[0]) if row is not None and row[0] else ""
    text = "\n\n".join(g.text for g in taken)
    # Each row's id rides along as an empty block (no model reads it), so the transcript
    # names the rows the follow-up holds (see the module docstring's torn commit).
    marks = tuple(ContextBlock("", KIND_PREFIX + g.id) for g in taken)
    request = TurnRequest(
        session, text, attended=finished.attended, reply_to=finished.reply_to, blocks=marks
    )
    enqueue_in(
        conn,
        followed,
        TURN_KIND,
        request,
        serial_key=session,
        max_attempts=FOLLOW_UP_ATTEMPTS,
        agent=agent,
        node=node,
        schema=control,
    )
    return followed


class WithGuidance:
    """A tool batch's results message as `TranscriptStore.append` writes it: called in
    the append's transaction, it takes the session's pending guidance into the message
    (when state.db is on that connection); `took` says whether it did."""

    def __init__(self, message: Message, session: str, turn: str, schema: str | None):
        self.message = message
        self.session = session
        self.turn = turn
        self.schema = schema
        self.took = False

    def __call__(self, conn: Conn) -> Message:
        if self.schema is None:
            return self.message
        taken = take_in(conn, self.session, self.turn, self.schema)
        if not taken:
            return self.message
        self.took = True
        return replace(self.message, blocks=[*self.message.blocks, *guidance_blocks(taken)])


@dataclass(frozen=True)
class Steering:
    """/steer's part of a turn (engine/agent/turn.py). `schema`: the name state.db has
    on the transcript's connection; None (not attached) steers nothing."""

    schema: str | None

    def opening(self, conn: Conn, session: str, turn: str) -> list[ContextBlock]:
        """The blocks the turn's opening message takes: guidance left pending."""
        schema = self.schema
        if schema is None or not opens_with_guidance(conn, session, turn, schema):
            return []
        return guidance_blocks(take_in(conn, session, turn, schema))

    def results(self, message: Message, session: str, turn: str) -> WithGuidance:
        """A tool batch's results message, to take pending guidance as it is appended."""
        return WithGuidance(message, session, turn, self.schema)

    def finish_in(
        self,
        conn: Conn,
        lease: Lease,
        result: dict[str, Any],
        request: TurnRequest,
        agent: str,
    ) -> None:
        """The final reply's transaction: the job done, and the guidance it left queued
        as its follow-up turn (not for a sub-turn, whose parent reads its reply)."""
        complete_in(conn, lease, result)
        if self.schema is not None and request.subturn is None:
            follow_up_in(
                conn, request.session, lease.job.id, request, agent=agent, schema=self.schema
            )
