"""Running a schedule's slot: prompt runs and script runs, their deliveries and statuses.

Runs go through the real runtime: the schedule is added through `runtime.schedules`,
`run_now` queues a slot job, the runtime's pools run it, and the reply or the output
reaches the web chat's conversation log (web.db) through the delivery jobs.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.jobs import Job
from habakkuk.engine.pools import PermanentJobError, Pool
from habakkuk.work.schedule_types import NewSchedule, Schedule, SlotRun
from habakkuk.work.schedule_views import slot_outcome
from tests.conftest import mock_config
from tests.fakes.model_server import FakeModelServer, Reply
from tests.helpers import eventually
from tests.server.conftest import serve  # noqa: F401  (the fixture)

CONVERSATION = "w1"
TO = f"web:{CONVERSATION}"


async def add(served: Any, **fields: Any) -> Schedule:
    values: dict[str, Any] = {"agent": "main", "name": "digest", "when": "@daily"}
    values.update(fields)
    schedule: Schedule = await served.runtime.schedules.add(NewSchedule(**values), by="owner")
    return schedule


async def run_once(served: Any, schedule: Schedule) -> SlotRun:
    """Queue one extra run and wait until its row settles."""
    job = await served.runtime.schedules.run_now(schedule.id)
    settled: list[SlotRun] = []

    async def done() -> bool:
        rows = [r for r in await served.runtime.schedules.runs(schedule.id) if r.job == job]
        settled[:] = [r for r in rows if r.status not in ("queued", "running")]
        return bool(settled)

    await eventually(done, what=f"the run {job} to settle")
    return settled[0]


async def settled_job(served: Any, job_id: str) -> Job:
    """The job once it is no longer queued or running."""
    found: list[Job] = []

    async def ended() -> bool:
        job = await served.runtime.queue.get(job_id)
        found[:] = [job] if job is not None and job.status not in ("queued", "running") else []
        return bool(found)

    await eventually(ended, what=f"job {job_id} to end")
    return found[0]


async def texts(served: Any, conversation: str = CONVERSATION) -> list[tuple[str, str]]:
    events = await served.server.web_store().events(conversation)
    return [(e.role, e.text) for e in events]


async def delivered(served: Any, schedule: Schedule, job: str) -> SlotRun:
    rows: list[SlotRun] = []

    async def known() -> bool:
        rows[:] = [
            r
            for r in await served.runtime.schedules.runs(schedule.id)
            if r.job == job and r.delivered is not None
        ]
        return bool(rows)

    await eventually(known, what=f"the delivery of {job} to be recorded")
    return rows[0]


# -- prompt runs --------------------------------------------------------------------


async def test_a_prompt_run_replies_in_the_web_conversation_it_was_created_from(
    serve: Any,  # noqa: F811
) -> None:
    served = await serve(mock_config("- text: 'Inbox: 3 new'"))
    schedule = await add(served, prompt="summarise my inbox", origin=TO)
    row = await run_once(served, schedule)
    assert row.status == "ran" and row.session
    await eventually(lambda: texts(served), what="the reply in the conversation")
    assert await texts(served) == [("assistant", "Inbox: 3 new")]
    assert (await delivered(served, schedule, row.job)).delivered is True
    session = await served.runtime.sessions.session(row.session)
    assert session.origin == "schedule"
    stored = await served.runtime.schedules.get(schedule.id)
    assert stored.last_status == "ok" and stored.last_output == "Inbox: 3 new"
    assert stored.last_run is not None


async def test_a_prompt_run_goes_to_deliver_to_over_its_origin(serve: Any) -> None:  # noqa: F811
    served = await serve(mock_config("- text: 'Morning.'"))
    schedule = await add(served, prompt="say hi", origin="web:elsewhere", deliver_to=TO)
    row = await run_once(served, schedule)
    await delivered(served, schedule, row.job)
    assert await texts(served) == [("assistant", "Morning.")]
    assert await texts(served, "elsewhere") == []


async def test_a_silent_reply_is_never_sent(serve: Any) -> None:  # noqa: F811
    served = await serve(mock_config("- text: '[SILENT]'"))
    schedule = await add(served, prompt="anything new?", deliver_to=TO)
    row = await run_once(served, schedule)
    assert row.status == "ran"
    reply = f"reply:turn_{row.job}"

    async def settled() -> bool:
        return await delivery_status(served, reply) == "done"

    await eventually(settled, what="the reply delivery to settle")
    assert await texts(served) == []


async def test_an_unattended_run_has_its_exec_denied(serve: Any, tmp_path: Path) -> None:  # noqa: F811
    marker = tmp_path / "ran"
    script = f"""
- tool_calls: [{{name: exec, arguments: {{command: "touch {marker}"}}}}]
- after: {{denied: "The exec was denied.", ok: "The exec ran."}}
"""
    served = await serve(mock_config(script, mode="ask"))
    schedule = await add(served, prompt="touch the marker", deliver_to=TO)
    row = await run_once(served, schedule)
    assert row.status == "ran"
    await delivered(served, schedule, row.job)
    assert await texts(served) == [("assistant", "The exec was denied.")]
    assert not marker.exists()


async def test_an_agent_with_a_reviewer_runs_what_the_reviewer_allows(
    serve: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    script = f"""
- match: '"tool"'
  steps: [{{text: '{{"decision": "allow", "reason": "routine"}}'}}]
- steps:
  - tool_calls: [{{name: exec, arguments: {{command: "touch {marker}"}}}}]
  - after: {{denied: "The exec was denied.", ok: "The exec ran."}}
"""
    config = mock_config(script, mode="ask").replace(
        "mode: ask\n", "mode: ask\n    approvals: reviewer\n"
    )
    served = await serve(config)
    schedule = await add(served, prompt="touch the marker", deliver_to=TO)
    row = await run_once(served, schedule)
    assert row.status == "ran"
    await delivered(served, schedule, row.job)
    assert await texts(served) == [("assistant", "The exec ran.")]
    assert marker.exists()


# -- script runs --------------------------------------------------------------------


@pytest.fixture
def model(model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    monkeypatch.setenv("REMOTE_KEY", "k")
    return model_server


def remote(model: FakeModelServer) -> str:
    return (
        "providers:\n"
        f"  remote:\n    type: openai\n    base_url: {model.base_url}/v1\n    key_env: REMOTE_KEY\n"
        "agents:\n  main:\n    model: remote/gpt-fake\n    mode: full\n"
    )


async def delivery_status(served: Any, job_id: str) -> str | None:
    job = await served.runtime.queue.get(job_id)
    return job.status if job is not None else None


async def test_a_script_output_is_delivered_without_any_model_request(
    serve: Any,  # noqa: F811
    model: FakeModelServer,
) -> None:
    served = await serve(remote(model))
    schedule = await add(served, command="echo 2 new invoices", on_output="deliver", deliver_to=TO)
    row = await run_once(served, schedule)
    assert row.status == "ran"
    assert (await delivered(served, schedule, row.job)).delivered is True
    assert await texts(served) == [("notice", "2 new invoices")]
    stored = await served.runtime.schedules.get(schedule.id)
    assert stored.last_status == "ok" and stored.last_output.strip() == "2 new invoices"
    assert model.requests == []


@pytest.mark.parametrize("command", ["echo '[SILENT]'", "true", "echo checked; echo '[SILENT]'"])
async def test_empty_or_silent_output_sends_nothing(
    serve: Any,  # noqa: F811
    model: FakeModelServer,
    command: str,
) -> None:
    served = await serve(remote(model))
    schedule = await add(served, command=command, on_output="deliver", deliver_to=TO)
    row = await run_once(served, schedule)
    assert row.status == "ran" and row.delivered is None
    assert await delivery_status(served, f"sched:{row.job}") is None
    assert await texts(served) == []
    assert model.requests == []


async def test_silent_on_output_sends_nothing_and_keeps_the_output(
    serve: Any,  # noqa: F811
    model: FakeModelServer,
) -> None:
    served = await serve(remote(model))
    schedule = await add(served, command="echo synced 4", on_output="silent", deliver_to=TO)
    row = await run_once(served, schedule)
    assert row.status == "ran"
    assert await delivery_status(served, f"sched:{row.job}") is None
    assert (await served.runtime.schedules.get(schedule.id)).last_output.strip() == "synced 4"
    assert model.requests == []


async def test_agent_on_output_starts_a_turn_with_the_output_appended(
    serve: Any,  # noqa: F811
    model: FakeModelServer,
) -> None:
    model.script(Reply(text="Two invoices are due."))
    served = await serve(remote(model))
    schedule = await add(
        served,
        command="echo invoice-17 invoice-18",
        on_output="agent",
        prompt="Tell me which invoices are due:",
        deliver_to=TO,
    )
    row = await run_once(served, schedule)
    assert row.status == "ran" and row.session
    await delivered(served, schedule, row.job)
    assert await texts(served) == [("assistant", "Two invoices are due.")]
    assert len(model.requests) == 1
    user = model.requests[0].json["messages"][-1]["content"]
    user = user if isinstance(user, str) else "".join(p.get("text", "") for p in user)
    assert "Tell me which invoices are due:" in user and "invoice-17 invoice-18" in user


async def test_a_script_past_its_timeout_fails_without_a_retry(
    serve: Any,  # noqa: F811
    model: FakeModelServer,
) -> None:
    served = await serve(remote(model))
    schedule = await add(served, command="sleep 30", timeout_seconds=0.3, deliver_to=TO)
    row = await run_once(served, schedule)
    assert row.status == "failed" and "timed out after 0.3s" in row.reason
    # The row is written by the job's handler: the job itself ends just after.
    job = await settled_job(served, row.job)
    assert job.status == "done" and job.attempts == 1
    assert (await served.runtime.schedules.get(schedule.id)).last_status.startswith("error:")


async def test_the_third_failure_in_a_row_sends_one_notice_and_recovery_says_so(
    serve: Any,  # noqa: F811
    model: FakeModelServer,
    tmp_path: Path,
) -> None:
    flag = tmp_path / "fixed"
    served = await serve(remote(model))
    command = f"test -f {flag} || {{ echo 'ledger locked' >&2; exit 2; }}; echo balanced"
    schedule = await add(served, command=command, deliver_to=TO)
    for _ in range(5):
        row = await run_once(served, schedule)
        assert row.status == "failed" and "ledger locked" in row.reason
    assert (await served.runtime.schedules.get(schedule.id)).fail_streak == 5
    flag.touch()
    row = await run_once(served, schedule)
    assert row.status == "ran"
    await delivered(served, schedule, row.job)

    async def recovered() -> bool:
        return len(await texts(served)) == 3

    await eventually(recovered, what="the notice, the recovery and the output")
    said = [text for _, text in await texts(served)]
    assert "failed 3 times in a row" in said[0] and "ledger locked" in said[0]
    assert "works again" in said[1]
    assert said[2] == "balanced"
    assert (await served.runtime.schedules.get(schedule.id)).fail_streak == 0
    assert model.requests == []


async def test_a_failed_delivery_is_recorded_as_delivery_failed(
    serve: Any,  # noqa: F811
    model: FakeModelServer,
) -> None:
    served = await serve(remote(model))
    runtime = served.runtime

    async def refuse(lease: Any) -> dict[str, Any]:
        raise PermanentJobError("undeliverable: bot was blocked by the user")

    # The process holding the `gone` account refuses the message for good.
    pool = Pool(runtime.queue, ["delivery:gone"], refuse, on_finished=runtime.job_settled)
    pool.start()
    try:
        schedule = await add(served, command="echo hello", deliver_to="gone:42")
        row = await run_once(served, schedule)
        assert row.status in ("ran", "delivery_failed")
        settled = await delivered(served, schedule, row.job)
    finally:
        await pool.stop()
    assert settled.status == "delivery_failed" and settled.delivered is False
    assert "bot was blocked" in settled.reason
    stored = await runtime.schedules.get(schedule.id)
    assert stored.last_status.startswith("delivery failed:")


async def test_a_retried_delivery_does_not_post_twice(
    serve: Any,  # noqa: F811
    model: FakeModelServer,
) -> None:
    served = await serve(remote(model))
    schedule = await add(served, command="echo once", deliver_to=TO)
    row = await run_once(served, schedule)
    await delivered(served, schedule, row.job)
    delivery = f"sched:{row.job}"

    def requeue(conn: sqlite3.Connection) -> None:
        conn.execute(
            "UPDATE jobs SET status = 'queued', result = NULL, run_after = 0 WHERE id = ?",
            (delivery,),
        )

    await served.runtime.queue.db.write(requeue)
    await served.runtime.queue.enqueue(delivery, "delivery:web", {})  # a repeat: a no-op

    async def redone() -> bool:
        return await delivery_status(served, delivery) == "done"

    await eventually(redone, what="the retried delivery")
    assert await texts(served) == [("notice", "once")]


async def test_each_run_fires_the_schedule_run_hook(
    serve: Any,  # noqa: F811
    model: FakeModelServer,
    tmp_path: Path,
) -> None:
    out = tmp_path / "hook.json"
    hooks = f"hooks:\n  - event: schedule_run\n    command: cat > {out}\n    match: ledger\n"
    served = await serve(remote(model) + hooks)
    schedule = await add(served, name="ledger sync", command="true")
    await run_once(served, schedule)
    await eventually(lambda: out.exists() and out.read_text(), what="the hook's input")
    event = json.loads(out.read_text())
    assert event["event"] == "schedule_run" and event["name"] == "ledger sync"
    assert event["schedule"] == schedule.id


async def test_a_web_conversation_with_colons_gets_its_delivery(
    serve: Any,  # noqa: F811
    model: FakeModelServer,
) -> None:
    served = await serve(remote(model))
    schedule = await add(served, command="echo hi", deliver_to="web:hook:ledger")
    row = await run_once(served, schedule)
    assert (await delivered(served, schedule, row.job)).delivered is True
    assert await texts(served, "hook:ledger") == [("notice", "hi")]


async def test_a_slot_due_while_the_script_still_runs_is_skipped(
    serve: Any,  # noqa: F811
    model: FakeModelServer,
    tmp_path: Path,
) -> None:
    from habakkuk.work.scheduler import Scheduler

    served = await serve(remote(model))
    gate = tmp_path / "gate"
    command = f"while [ ! -f {gate} ]; do sleep 0.05; done; echo finished"
    schedule = await add(
        served, when="@hourly", command=command, on_output="silent", timeout_seconds=60
    )
    job = await served.runtime.schedules.run_now(schedule.id)

    async def status_of(job_id: str) -> str | None:
        rows = [r for r in await served.runtime.schedules.runs(schedule.id) if r.job == job_id]
        return rows[0].status if rows else None

    async def running() -> bool:
        return await status_of(job) == "running"

    await eventually(running, what="the first run to start")
    assert schedule.next_run is not None
    due = schedule.next_run + 1
    await Scheduler(served.runtime.schedules, clock=lambda: due).tick()
    rows = await served.runtime.schedules.runs(schedule.id)
    skipped = [r for r in rows if r.status == "skipped"]
    assert [(r.slot, r.reason) for r in skipped] == [(schedule.next_run, "still running")]
    assert await served.runtime.queue.get(f"{schedule.id}_{int(schedule.next_run)}") is None
    gate.touch()

    async def ran() -> bool:
        return await status_of(job) == "ran"

    await eventually(ran, what="the first run to finish")


# -- where a run's message went, in words ------------------------------------------------


async def test_a_prompt_run_with_nowhere_to_deliver_says_so_not_nothing(
    serve: Any,  # noqa: F811
) -> None:
    served = await serve(mock_config("- text: 'Inbox: 3 new'"))
    schedule = await add(served, prompt="summarise my inbox")  # no deliver_to, no origin
    row = await run_once(served, schedule)
    assert row.status == "ran" and row.delivered is None
    assert slot_outcome(row) == (
        "ran, not delivered: no deliver_to, and not added from a chat; the reply is in its session"
    )


async def test_a_delivered_run_names_where_it_went(serve: Any) -> None:  # noqa: F811
    served = await serve(mock_config("- text: 'Morning.'"))
    schedule = await add(served, prompt="say hi", deliver_to=TO)
    row = await run_once(served, schedule)
    assert slot_outcome(row) in (f"ran, delivering to {TO}", f"ran, delivered to {TO}")
    settled = await delivered(served, schedule, row.job)
    assert slot_outcome(settled) == f"ran, delivered to {TO}"


async def test_a_silent_reply_reads_as_silent(serve: Any) -> None:  # noqa: F811
    served = await serve(mock_config("- text: '[SILENT]'"))
    schedule = await add(served, prompt="anything new?")
    row = await run_once(served, schedule)
    assert slot_outcome(row) == "ran, the reply was [SILENT]: nothing sent"


@pytest.mark.parametrize(
    ("command", "on_output", "says"),
    [
        (
            "echo 2 new invoices",
            "deliver",
            "ran, not delivered: no deliver_to, and not added from a chat; "
            "the output is kept (habakkuk schedules show)",
        ),
        ("echo synced 4", "silent", "ran, on_output silent: the output is kept, not sent"),
        ("true", "deliver", "ran, no output (or [SILENT]): nothing to send"),
    ],
)
async def test_a_script_run_says_where_its_output_went(
    serve: Any,  # noqa: F811
    model: FakeModelServer,
    command: str,
    on_output: str,
    says: str,
) -> None:
    served = await serve(remote(model))
    schedule = await add(served, command=command, on_output=on_output)
    row = await run_once(served, schedule)
    assert slot_outcome(row) == says
