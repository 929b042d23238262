"""The "done when" journey of the board: in the web chat the user asks the agent to split
a job into two cards for two agents, the second depending on the first; the second
starts once the first is done, with its result; both results come back to that chat.

The runtime is the real one with its dispatcher (maintenance on), the web chat and the
scripted mock model. The board's own tools are another module's; the agents here use
two test tools that call the turn's board the way board_create and board_complete do:
`split_job` creates the two cards from the turn (its session and the chat it answers
to), `finish_card` completes the card of the attempt the turn runs."""

from __future__ import annotations

from typing import Any

from habakkuk.engine.agent.requests import turn_request
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolOutput
from habakkuk.work.board_types import NewCard, attempt_session
from tests.helpers import eventually
from tests.server.conftest import serve  # noqa: F401  (the fixture)
from tests.work.test_board_dispatch import FinishCard

CONFIG = """providers:
  mock:
    type: mock
    script:
      - match: 'split the launch'
        steps:
          - tool_calls: [{name: split_job, arguments: {}}]
          - text: "Two cards are on the board."
      - match: 'Title: (Research|Announce)'
        steps:
          - tool_calls: [{name: finish_card, arguments: {result: "checked and done"}}]
          - text: "finished"
      - match: '^Board card'
        steps: [{text: "Update: {input}"}]
      - steps: [{text: "noted"}]
agents:
  main:
    model: mock/scripted
    mode: full
  writer:
    model: mock/scripted
    mode: full
board:
  dispatch_seconds: 600
"""
CONVERSATION = "w1"


class SplitJob(Tool):
    """Puts two cards on the board from this turn: research (main), then the
    announcement (writer), which depends on it (test tool)."""

    name = "split_job"
    description = "split the job into two cards"
    input_schema = {"type": "object", "properties": {}}
    risk = Risk.READ

    def __init__(self, queue: Any, board: Any):
        self.queue = queue
        self.board = board

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        board = self.board
        job = await self.queue.get(ctx.turn)
        request = turn_request(job) if job is not None else None
        reply_to = request.reply_to if request is not None else None
        first = await board.create(
            NewCard("Research", assignee="main", creator_session=ctx.session, reply_to=reply_to),
            by=ctx.agent,
        )
        second = await board.create(
            NewCard(
                "Announce",
                assignee="writer",
                depends_on=(first.id,),
                creator_session=ctx.session,
                reply_to=reply_to,
            ),
            by=ctx.agent,
        )
        return ToolOutput(f"created {first.id} and {second.id}")


async def test_two_cards_split_from_a_chat_run_in_order_and_answer_that_chat(
    serve: Any,  # noqa: F811
) -> None:
    served = await serve(CONFIG, workers=False)
    runtime = served.runtime
    runtime.tools.register(SplitJob(runtime.queue, runtime.board), "core")
    runtime.tools.register(FinishCard(runtime.board), "core")
    runtime.start_workers(maintenance=True)
    asked = await served.post_json(
        "/api/chat", {"conversation": CONVERSATION, "text": "please split the launch"}
    )

    async def texts() -> list[str]:
        events = await served.server.web_store().events(CONVERSATION)
        return [e.text for e in events if e.role == "assistant"]

    async def both_answered() -> bool:
        return len([t for t in await texts() if t.startswith("Update:")]) >= 2

    await eventually(both_answered, what="both cards' results in the chat", timeout=60)
    said = await texts()
    assert said[0] == "Two cards are on the board."
    updates = [t for t in said if t.startswith("Update:")]
    assert len(updates) == 2  # each result once
    assert "'Research'" in updates[0] and "checked and done: Research" in updates[0]
    assert "'Announce'" in updates[1] and "checked and done: Announce" in updates[1]

    cards = {c.title: c for c in await runtime.board.list_cards(status="all")}
    research, announce = cards["Research"], cards["Announce"]
    assert research.status == announce.status == "done"
    assert research.creator_session == announce.creator_session == asked["session"]
    # The second started only once the first was done, and saw its result.
    research = await runtime.board.get(research.id)
    announce = await runtime.board.get(announce.id)
    completed = next(e.at for e in research.events if e.kind == "completed")
    claimed = next(e.at for e in announce.events if e.kind == "claimed")
    assert claimed >= completed
    first = await runtime.sessions.messages(attempt_session(announce.id, 1))
    assert "checked and done: Research" in first[0].message.text
    writer = await runtime.sessions.session(attempt_session(announce.id, 1))
    assert writer.agent == "writer" and writer.origin == "board"
