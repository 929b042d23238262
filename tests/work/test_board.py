"""The Board service on a real control.db: validation, the rules of spec 000 "Board" (each
refusal names its rule), id prefixes, dependencies, revisions, the event log, CardChanged
and the wake, and stopping the run of a card reassigned or cancelled in progress."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import AsyncIterator
from typing import Any

import pytest

from habakkuk.engine.agent.requests import ReplyTo
from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.events import CardChanged
from habakkuk.engine.home import Home
from habakkuk.engine.storage import Storage
from habakkuk.work.board_types import (
    CARD_KIND,
    TEXT_MAX,
    TITLE_MAX,
    USER,
    WAKE_FILE,
    BoardRefused,
    Card,
    NewCard,
    attempt_session,
    card_job_id,
)
from tests.work.board_env import Control, board_config, open_control


@pytest.fixture
async def control(home: Home, storage: Storage) -> AsyncIterator[Control]:
    opened = await open_control(home, board_config(home), storage=storage)
    yield opened
    await opened.close()


async def add(control: Control, title: str = "write the report", **fields: Any) -> Card:
    by = fields.pop("by", USER)
    return await control.board.create(NewCard(title=title, **fields), by=by)


async def doing(control: Control, card: Card) -> Card:
    """Claim the card's next attempt as the dispatcher would, with its job queued."""
    claimed = await control.store.claim(card.id, card.attempt)
    assert claimed is not None and claimed.status == "doing"
    await control.queue.enqueue(card_job_id(card.id, claimed.attempt), CARD_KIND, {"card": card.id})
    return claimed


# -- create and validation ------------------------------------------------------------------


async def test_create_stores_a_todo_card_read_back_with_its_created_event(
    control: Control,
) -> None:
    card = await add(
        control,
        "  write the report  ",
        body="with sources",
        assignee="other",
        priority=5,
        by="main",
        creator_session="ses_parent",
        reply_to=ReplyTo("telegram:42", "7", "alice"),
    )
    assert card.id.startswith("card_") and len(card.id) == 15
    assert (card.title, card.body, card.status, card.priority) == (
        "write the report",
        "with sources",
        "todo",
        5,
    )
    assert (card.assignee, card.created_by, card.attempt, card.revision) == ("other", "main", 0, 1)
    assert card.creator_session == "ses_parent"
    assert card.reply_to == ReplyTo("telegram:42", "7", "alice")
    assert [(e.author, e.kind, e.text) for e in card.events] == [("main", "created", "for other")]
    assert await control.board.get(card.id) == card


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"title": "   "}, "title is empty"),
        ({"title": "x" * (TITLE_MAX + 1)}, f"at most {TITLE_MAX}"),
        ({"body": "x" * (TEXT_MAX + 1)}, "body is"),
        ({"priority": 101}, "priority 101 is not a whole number in -100..100"),
        ({"priority": True}, "priority True"),
        ({"assignee": "nobody"}, "no agent 'nobody' (agents: main, other, third)"),
        ({"deliver_to": "telegram"}, "is not CHANNEL:CHAT[:THREAD]"),
    ],
)
async def test_create_refuses_bad_input_with_one_line_naming_it(
    control: Control, fields: dict[str, Any], message: str
) -> None:
    fields = {"title": "a card", **fields}
    with pytest.raises(HabakkukError, match=re.escape(message)) as err:
        await control.board.create(NewCard(**fields))
    assert "\n" not in str(err.value)
    assert await control.board.list_cards(status="all") == []


async def test_a_dependency_or_parent_that_does_not_exist_is_refused_naming_it(
    control: Control,
) -> None:
    real = await add(control)
    with pytest.raises(NotFound, match="dependency 'card_0000000000' does not exist"):
        await add(control, depends_on=(real.id, "card_0000000000"))
    with pytest.raises(NotFound, match="parent 'feedbeef' does not exist"):
        await add(control, parent="feedbeef")
    assert [c.id for c in await control.board.list_cards()] == [real.id]


async def test_dependencies_are_deduplicated_resolved_from_prefixes_and_fixed(
    control: Control,
) -> None:
    first = await add(control, "first")
    second = await add(control, "second")
    card = await add(
        control,
        "third",
        parent=first.id[5:9],
        depends_on=(first.id, first.id[5:], second.id, first.id),
    )
    assert card.depends_on == (first.id, second.id)
    assert card.parent == first.id
    # The Protocol has no way to add a dependency later, so a cycle cannot form.
    assert not hasattr(control.board, "add_dependency")


async def test_waiting_on_names_the_dependencies_not_done_with_their_status(
    control: Control,
) -> None:
    first = await add(control, "first", assignee="main")
    second = await add(control, "second", assignee="main")
    card = await add(control, "third", depends_on=(first.id, second.id))
    assert card.waiting_on == ((first.id, "todo"), (second.id, "todo"))
    await control.board.complete(first.id, "done: report.md", by="main")
    await control.board.block(second.id, "which year?", by="main")
    card = await control.board.get(card.id)
    assert card.waiting_on == ((second.id, "blocked"),)
    listed = {c.id: c for c in await control.board.list_cards()}
    assert listed[card.id].waiting_on == ((second.id, "blocked"),)
    assert listed[card.id].depends_on == (first.id, second.id)


# -- prefixes and lists ---------------------------------------------------------------------


async def insert(control: Control, card_id: str, **fields: Any) -> None:
    values: dict[str, Any] = {
        "card_id": card_id,
        "title": card_id,
        "body": "",
        "assignee": "",
        "created_by": USER,
        "priority": 0,
        "parent": None,
        "depends_on": (),
    }
    values.update(fields)
    await control.store.insert(**values)


async def test_get_takes_a_unique_prefix_with_or_without_card_and_lists_an_ambiguous_one(
    control: Control,
) -> None:
    await insert(control, "card_3fa0000001")
    await insert(control, "card_3fa0000002")
    await insert(control, "card_4bc0000003")
    assert (await control.board.get("4b")).id == "card_4bc0000003"
    assert (await control.board.get("card_4bc")).id == "card_4bc0000003"
    assert (await control.board.get("3fa0000002")).id == "card_3fa0000002"
    with pytest.raises(HabakkukError, match="names several cards: card_3fa0000001, card_3fa00"):
        await control.board.get("3fa")
    with pytest.raises(NotFound, match="no card '5'"):
        await control.board.get("5")
    with pytest.raises(HabakkukError, match="a card id is required"):
        await control.board.get("  ")


async def test_list_filters_by_status_and_assignee_highest_priority_then_oldest(
    control: Control,
) -> None:
    low = await add(control, "low", assignee="main", priority=-1)
    first = await add(control, "first", assignee="main")
    top = await add(control, "top", assignee="other", priority=9)
    free = await add(control, "free")
    gone = await add(control, "gone", assignee="main")
    await control.board.cancel(gone.id)
    ids = [c.id for c in await control.board.list_cards()]
    assert ids == [top.id, first.id, free.id, low.id]
    assert [c.id for c in await control.board.list_cards(assignee="main")] == [first.id, low.id]
    assert [c.id for c in await control.board.list_cards(assignee="")] == [free.id]
    assert [c.id for c in await control.board.list_cards(status="cancelled")] == [gone.id]
    assert len(await control.board.list_cards(status="all")) == 5
    assert [c.id for c in await control.board.list_cards(limit=2)] == [top.id, first.id]
    listed = (await control.board.list_cards(status="cancelled"))[0]
    assert listed.comments == () and listed.events == ()
    with pytest.raises(HabakkukError, match="unknown status 'later' \\(one of: open, all, todo"):
        await control.board.list_cards(status="later")
    with pytest.raises(HabakkukError, match=r"limit 0 is not in 1\.\.10000"):
        await control.board.list_cards(limit=0)


async def test_counts_every_status_zeros_included(control: Control) -> None:
    assert await control.board.counts() == {
        "todo": 0,
        "doing": 0,
        "blocked": 0,
        "done": 0,
        "cancelled": 0,
    }
    await add(control)
    done = await add(control, assignee="main")
    await control.board.complete(done.id, "shipped: v1.2 tag", by="main")
    await doing(control, await add(control, assignee="main"))
    counts = await control.board.counts()
    assert (counts["todo"], counts["doing"], counts["done"], counts["blocked"]) == (1, 1, 1, 0)


# -- the rules ------------------------------------------------------------------------------


async def test_an_agent_completes_or_blocks_only_cards_assigned_to_it(control: Control) -> None:
    card = await add(control, assignee="other", by="main")
    with pytest.raises(BoardRefused, match=r"main cannot complete .*assigned to other"):
        await control.board.complete(card.id, "done", by="main")
    with pytest.raises(BoardRefused, match=r"main cannot block .*completes or blocks only its own"):
        await control.board.block(card.id, "why?", by="main")
    blocked = await control.board.block(card.id, "which format?", by="other", session="ses_x")
    assert (blocked.status, blocked.blocked_kind, blocked.blocked_reason) == (
        "blocked",
        "question",
        "which format?",
    )
    assert blocked.events[-1].text == "[ses_x] which format?"
    done = await control.board.complete(card.id, "report.md, 3 pages", by="other")
    assert (done.status, done.result, done.blocked_kind, done.blocked_reason) == (
        "done",
        "report.md, 3 pages",
        "",
        "",
    )


async def test_a_failed_block_is_told_apart_from_a_question(control: Control) -> None:
    card = await add(control, assignee="main")
    failed = await control.board.block(card.id, "the site is down", by="main", kind="failed")
    assert (failed.blocked_kind, failed.events[-1].kind) == ("failed", "failed")
    with pytest.raises(HabakkukError, match="block kind 'later' is not question or failed"):
        await control.board.block(card.id, "x", by="main", kind="later")  # type: ignore[arg-type]  # on purpose


async def test_an_agent_updates_only_cards_it_created_or_holds_and_the_user_any(
    control: Control,
) -> None:
    card = await add(control, assignee="other", by="main")
    for action in (
        control.board.assign(card.id, "third", by="third"),
        control.board.set_priority(card.id, 3, by="third"),
        control.board.cancel(card.id, by="third"),
    ):
        with pytest.raises(BoardRefused, match="an agent updates only cards it created or holds"):
            await action
    assert (await control.board.set_priority(card.id, 3, by="main")).priority == 3  # creator
    assert (await control.board.set_priority(card.id, 4, by="other")).priority == 4  # holder
    assert (await control.board.assign(card.id, "third")).assignee == "third"  # the user
    # "other" no longer holds it, and never created it.
    with pytest.raises(BoardRefused, match="other cannot reprioritise"):
        await control.board.set_priority(card.id, 1, by="other")
    # Anyone may comment, on any card.
    commented = await control.board.comment(card.id, "  try the archive  ", by="other")
    assert [(c.author, c.text) for c in commented.comments] == [("other", "try the archive")]


async def test_complete_needs_a_non_empty_result(control: Control) -> None:
    card = await add(control, assignee="main")
    with pytest.raises(HabakkukError, match="result is empty"):
        await control.board.complete(card.id, "  ", by="main")
    with pytest.raises(HabakkukError, match="reason is empty"):
        await control.board.block(card.id, "", by="main")
    with pytest.raises(HabakkukError, match="comment is empty"):
        await control.board.comment(card.id, "\n")
    assert (await control.board.get(card.id)).status == "todo"


@pytest.mark.parametrize("finish", ["done", "cancelled"])
async def test_a_finished_card_cannot_be_completed_blocked_assigned_or_cancelled(
    control: Control, finish: str
) -> None:
    card = await add(control, assignee="main")
    if finish == "done":
        await control.board.complete(card.id, "ok: merged", by="main")
    else:
        await control.board.cancel(card.id)
    with pytest.raises(BoardRefused, match=f"is {finish}: a finished card cannot be completed"):
        await control.board.complete(card.id, "again", by=USER)
    with pytest.raises(BoardRefused, match=f"is {finish}: a finished card cannot be blocked"):
        await control.board.block(card.id, "hm", by="main")
    with pytest.raises(BoardRefused, match="a finished card cannot be assigned"):
        await control.board.assign(card.id, "other")
    with pytest.raises(BoardRefused, match=f"is already {finish}"):
        await control.board.cancel(card.id)


async def test_reopen_takes_a_blocked_done_or_cancelled_card_back_to_todo_clearing_it(
    control: Control,
) -> None:
    card = await add(control, assignee="main", by="main")
    with pytest.raises(BoardRefused, match="is todo: only a blocked, done or cancelled card"):
        await control.board.reopen(card.id)
    await control.board.block(card.id, "which year?", by="main")
    reopened = await control.board.reopen(card.id, by="main")
    assert (reopened.status, reopened.blocked_kind, reopened.blocked_reason) == ("todo", "", "")
    await control.board.complete(card.id, "2025: table.csv", by="main")
    reopened = await control.board.reopen(card.id)
    assert (reopened.status, reopened.result) == ("todo", "")
    assert reopened.events[-1].text == "after done"


async def test_an_agent_cannot_reopen_a_card_out_of_attempts_but_the_user_can(
    control: Control,
) -> None:
    card = await add(control, assignee="main", by="main")
    for _ in range(2):  # board.max_attempts: 2 in this config
        current = await control.board.get(card.id)
        await doing(control, current)
        await control.board.block(card.id, "crashed", by="main", kind="failed")
        if _ == 0:
            await control.board.reopen(card.id, by="main")
    with pytest.raises(BoardRefused, match=r"has used 2 of 2 attempts \(board.max_attempts\)"):
        await control.board.reopen(card.id, by="main")
    assert (await control.board.reopen(card.id, by=USER)).status == "todo"


# -- revisions, the log, events and the wake -------------------------------------------------


async def test_every_change_bumps_the_revision_and_logs_in_order(control: Control) -> None:
    card = await add(control, by="main")
    steps = [
        control.board.assign(card.id, "other"),
        control.board.set_priority(card.id, 7, by="main"),
        control.board.comment(card.id, "first note", by="other"),
        control.board.block(card.id, "stuck", by="other"),
        control.board.comment(card.id, "second note"),
        control.board.reopen(card.id),
        control.board.complete(card.id, "all done: out.txt", by="other", session="ses_a"),
    ]
    revisions = []
    for step in steps:
        revisions.append((await step).revision)
    assert revisions == list(range(2, 9))
    final = await control.board.get(card.id)
    assert [(e.author, e.kind, e.text) for e in final.events] == [
        ("main", "created", ""),
        (USER, "assigned", "other"),
        ("main", "priority", "7"),
        ("other", "blocked", "stuck"),
        (USER, "reopened", "after blocked"),
        ("other", "completed", "[ses_a] all done: out.txt"),
    ]
    assert [(c.author, c.text) for c in final.comments] == [
        ("other", "first note"),
        (USER, "second note"),
    ]
    assert final.updated_at >= final.created_at
    # A change to what the card already is writes nothing.
    assert (await control.board.set_priority(card.id, 7)).revision == final.revision


async def test_every_change_publishes_card_changed_and_wakes_the_dispatchers(
    control: Control, home: Home
) -> None:
    woken: list[int] = []
    control.board.on_wake(lambda: woken.append(1))
    with control.bus.subscribe(lambda e: isinstance(e, CardChanged)) as events:
        card = await add(control, assignee="main")
        await control.board.complete(card.id, "done: notes.md", by="main")
        first, second = events.get_nowait(), events.get_nowait()
    assert isinstance(first, CardChanged) and isinstance(second, CardChanged)
    assert (first.card, first.status, first.assignee, first.revision) == (
        card.id,
        "todo",
        "main",
        1,
    )
    assert (second.status, second.revision, second.title) == ("done", 2, card.title)
    assert woken == [1, 1]
    wake_file = home.root / WAKE_FILE
    assert stat.S_IMODE(os.stat(wake_file).st_mode) == 0o600


async def test_a_failing_wake_callback_never_fails_the_change(control: Control) -> None:
    def broken() -> None:
        raise RuntimeError("listener gone")

    control.board.on_wake(broken)
    assert (await add(control)).status == "todo"


# -- stopping a run -------------------------------------------------------------------------


async def test_reassigning_a_card_in_progress_cancels_its_job_and_puts_it_back_to_todo(
    control: Control,
) -> None:
    card = await doing(control, await add(control, assignee="main"))
    job = card_job_id(card.id, 1)
    moved = await control.board.assign(card.id, "other")
    assert (moved.status, moved.assignee, moved.attempt) == ("todo", "other", 1)
    stored = await control.queue.get(job)
    assert stored is not None and stored.status == "cancelled"
    assert [(e.kind, e.text) for e in moved.events[-2:]] == [
        ("assigned", "other"),
        ("stopped", job),
    ]
    # The stopped attempt can no longer settle the card; the next claim is attempt 2.
    assert await control.store.settle_attempt(card.id, 1, status="blocked", reason="x") is None
    again = await control.store.claim(card.id, 1)
    assert again is not None and again.session == attempt_session(card.id, 2)


async def test_cancelling_a_card_in_progress_cancels_its_job(control: Control) -> None:
    card = await doing(control, await add(control, assignee="main"))
    cancelled = await control.board.cancel(card.id)
    assert cancelled.status == "cancelled" and cancelled.events[-1].kind == "stopped"
    stored = await control.queue.get(card_job_id(card.id, 1))
    assert stored is not None and stored.status == "cancelled"


async def test_a_run_in_this_process_is_stopped_by_its_pool_not_the_queue(
    home: Home, storage: Storage
) -> None:
    config = board_config(home)
    probe = await open_control(home, config, storage=storage)
    card = await probe.board.create(NewCard(title="t", assignee="main"))
    await probe.close()
    job = card_job_id(card.id, 1)
    control = await open_control(home, config, local_jobs=frozenset({job}), storage=storage)
    try:
        await doing(control, card)
        await control.board.cancel(card.id)
        assert control.stopped == [job]
        stored = await control.queue.get(job)
        assert stored is not None and stored.status == "queued"  # the pool settles it
    finally:
        await control.close()


# -- the runtime ----------------------------------------------------------------------------


async def test_the_runtime_serves_one_board_to_turns_and_the_overview(
    runtime_factory: Any, home: Home
) -> None:
    from tests.work.board_env import CONFIG

    runtime = await runtime_factory(CONFIG)
    assert runtime.control.board is runtime.board
    card = await runtime.board.create(NewCard(title="from the runtime", assignee="main"))
    assert (await runtime.board.counts())["todo"] == 1
    assert (await runtime.board.get(card.id[5:9])).id == card.id
    assert (home.root / WAKE_FILE).exists()


async def test_who_acts_is_required_so_nobody_passes_for_the_holder_of_an_unassigned_card(
    control: Control,
) -> None:
    card = await add(control)  # unassigned: its assignee is ""
    with pytest.raises(HabakkukError, match=r"who acts \(by\) is required"):
        await control.board.complete(card.id, "done", by="")
    with pytest.raises(HabakkukError, match=r"who acts \(by\) is required"):
        await control.board.cancel(card.id, by=" ")
    assert (await control.board.get(card.id)).status == "todo"


async def test_a_stopped_attempt_can_no_longer_complete_the_card(control: Control) -> None:
    card = await doing(control, await add(control, assignee="main"))
    old_session = card.session
    await control.board.assign(card.id, "other")
    await control.board.assign(card.id, "main")
    await doing(control, await control.board.get(card.id))
    with pytest.raises(BoardRefused, match=f"{old_session} is a stopped attempt of card"):
        await control.board.complete(card.id, "late: stale.txt", by="main", session=old_session)
    current = await control.board.get(card.id)
    done = await control.board.complete(card.id, "ok: new.txt", by="main", session=current.session)
    assert done.status == "done"
