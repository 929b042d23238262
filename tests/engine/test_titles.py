"""Titles in the background: after a session's first turn, one call on title_model
names it in three to six words, replacing only a first-message title."""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.engine.agent.titles import (
    TITLE_SYSTEM,
    clean_title,
    title_job_id,
    title_pool,
)
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.events import SessionRenamed
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import Job
from habakkuk.runtime import Runtime
from tests.conftest import OpenRuntime
from tests.fakes.model_server import Fail, FakeModelServer, RecordedRequest, Reply
from tests.helpers import eventually

FIRST = "Can you help me plan three days in Lisbon next month?"


def _config(base_url: str, extra: str = "", agent_extra: str = "") -> str:
    return (
        "providers:\n"
        "  fake:\n"
        "    type: openai\n"
        f"    base_url: {base_url}/v1\n"
        "    key_env: FAKE_KEY\n"
        "agents:\n"
        "  main:\n"
        "    model: fake/gpt-fake\n" + agent_extra + extra
    )


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", "k")


async def _turn(runtime: Runtime, session: str, text: str) -> None:
    turn = await runtime.turns.submit(session, text)
    outcome = await runtime.turns.wait_turn(turn, poll=0.05)
    assert outcome.status == "done", outcome


def _title_requests(server: FakeModelServer) -> list[RecordedRequest]:
    return [r for r in server.requests if _system(r) == TITLE_SYSTEM]


def _system(request: RecordedRequest) -> str:
    messages = request.json.get("messages", []) if isinstance(request.json, dict) else []
    first = messages[0] if messages else {}
    return str(first.get("content", "")) if first.get("role") == "system" else ""


async def _settled(runtime: Runtime, session: str) -> Job:
    """The session's title job once it has finished (done or failed)."""
    found: list[Job] = []

    async def finished() -> bool:
        job = await runtime.queue.get(title_job_id(session))
        found[:] = [job] if job is not None else []
        return job is not None and job.status in ("done", "failed")

    await eventually(finished, what="the title job to finish")
    return found[0]


async def test_the_first_turn_titles_the_session_in_the_background(
    model_server: FakeModelServer, runtime_factory: OpenRuntime
) -> None:
    runtime = await runtime_factory(_config(model_server.base_url))
    runtime.start_workers(channels=False, maintenance=True)
    session = await runtime.sessions.new_session()
    renamed = runtime.bus.subscribe(lambda e: isinstance(e, SessionRenamed))
    model_server.script(
        Reply("Happy to. Day one: Alfama and the castle."),
        Reply('Title: "Three Days in Lisbon."'),
        Reply("Day two: Belém."),
    )

    await _turn(runtime, session.id, FIRST)
    assert (await runtime.sessions.session(session.id)).title == FIRST
    job = await _settled(runtime, session.id)

    assert job.status == "done"
    titled = await runtime.sessions.session(session.id)
    assert (titled.title, titled.title_source) == ("Three Days in Lisbon", "generated")
    [asked] = _title_requests(model_server)
    assert FIRST in asked.json["messages"][1]["content"]  # the conversation, as data
    assert "Alfama" in asked.json["messages"][1]["content"]
    event = await renamed.get()
    assert isinstance(event, SessionRenamed)
    assert (event.session, event.title, event.source) == (
        session.id,
        "Three Days in Lisbon",
        "generated",
    )
    # The call is in the session's usage like the turn's.
    totals = await runtime.ledger.usage_totals(session=session.id)
    assert sum(t.calls for t in totals) == 2

    await _turn(runtime, session.id, "And the second day?")
    assert len(_title_requests(model_server)) == 1  # once per session
    assert (await runtime.sessions.session(session.id)).title == "Three Days in Lisbon"


async def test_a_title_set_by_hand_is_never_replaced(
    model_server: FakeModelServer, runtime_factory: OpenRuntime
) -> None:
    runtime = await runtime_factory(_config(model_server.base_url))
    runtime.start_workers(channels=False, maintenance=False)  # nothing runs the title job yet
    before = await runtime.sessions.new_session()
    meanwhile = await runtime.sessions.new_session()
    model_server.script(Reply("Sure."), Reply("Noted."))

    # Set before the first turn: no title job is queued at all.
    await runtime.sessions.rename_session(before.id, "Lisbon")
    await _turn(runtime, before.id, FIRST)
    assert await runtime.queue.get(title_job_id(before.id)) is None
    # Set after the first turn queued the job, before it ran: the job leaves it.
    await _turn(runtime, meanwhile.id, FIRST)
    assert await runtime.queue.get(title_job_id(meanwhile.id)) is not None
    await runtime.sessions.rename_session(meanwhile.id, "Porto")
    pool = title_pool(runtime.queue, runtime)
    pool.start()
    try:
        job = await _settled(runtime, meanwhile.id)
    finally:
        await pool.stop()

    assert job.status == "done"
    assert (await runtime.sessions.session(before.id)).title == "Lisbon"
    assert (await runtime.sessions.session(meanwhile.id)).title == "Porto"
    assert _title_requests(model_server) == []


async def test_the_title_write_is_conditional_on_a_first_message_title(
    model_server: FakeModelServer, runtime_factory: OpenRuntime
) -> None:
    runtime = await runtime_factory(
        _config(model_server.base_url, agent_extra="    title_model: off\n")
    )
    runtime.start_workers(channels=False)
    session = await runtime.sessions.new_session()
    model_server.script(Reply("Sure."))
    await _turn(runtime, session.id, FIRST)

    replaced = await runtime.transcripts.replace_first_message_title(session.id, "Lisbon Days")
    assert replaced is not None and replaced.title_source == "generated"
    await runtime.sessions.rename_session(session.id, "Mine")
    assert await runtime.transcripts.replace_first_message_title(session.id, "Other") is None
    assert (await runtime.sessions.session(session.id)).title == "Mine"


@pytest.mark.parametrize(
    ("extra", "agent_extra"),
    [("", "    title_model: off\n"), ("title_model: off\n", "")],
    ids=["agent", "top-level"],
)
async def test_title_model_off_leaves_the_first_message_title(
    model_server: FakeModelServer, runtime_factory: OpenRuntime, extra: str, agent_extra: str
) -> None:
    runtime = await runtime_factory(_config(model_server.base_url, extra, agent_extra))
    runtime.start_workers(channels=False, maintenance=True)
    session = await runtime.sessions.new_session()
    model_server.script(Reply("Sure."))

    await _turn(runtime, session.id, FIRST)

    # The job would have been queued in the reply's own transaction.
    assert await runtime.queue.get(title_job_id(session.id)) is None
    assert (await runtime.sessions.session(session.id)).title == FIRST
    assert len(model_server.requests) == 1


async def test_a_failing_title_call_leaves_the_first_message_title(
    model_server: FakeModelServer, runtime_factory: OpenRuntime
) -> None:
    runtime = await runtime_factory(_config(model_server.base_url))
    runtime.start_workers(channels=False, maintenance=True)
    session = await runtime.sessions.new_session()
    model_server.script(Reply("Sure."), Fail(400, message="this model cannot title"))

    await _turn(runtime, session.id, FIRST)
    job = await _settled(runtime, session.id)

    assert job.status == "failed"
    assert "this model cannot title" in (job.error or "")
    titled = await runtime.sessions.session(session.id)
    assert (titled.title, titled.title_source) == (FIRST, "first_message")
    assert len(model_server.requests) == 2  # not tried again


async def test_a_title_model_of_its_own_is_the_one_called(
    model_server: FakeModelServer, runtime_factory: OpenRuntime
) -> None:
    runtime = await runtime_factory(
        _config(model_server.base_url, extra="title_model: fake/tiny-titler\n")
    )
    runtime.start_workers(channels=False, maintenance=True)
    session = await runtime.sessions.new_session()
    model_server.script(Reply("Sure."), Reply("Lisbon in three days"))

    await _turn(runtime, session.id, FIRST)
    assert (await _settled(runtime, session.id)).status == "done"

    assert [r.json["model"] for r in model_server.requests] == ["gpt-fake", "tiny-titler"]
    assert (await runtime.sessions.session(session.id)).title == "Lisbon in three days"


@pytest.mark.parametrize(
    ("answer", "title"),
    [
        ('"Weekend in Lisbon"', "Weekend in Lisbon"),
        ("Title: Planning a Lisbon trip.\nHope that helps!", "Planning a Lisbon trip"),
        ("**Lisbon Trip Plan for Three Sunny Days Away**", "Lisbon Trip Plan for Three Sunny"),
        ("  \n« Voyage à Lisbonne »", "Voyage à Lisbonne"),
        ('""', None),
    ],
)
def test_a_models_answer_is_cut_to_a_clean_title(answer: str, title: str | None) -> None:
    assert clean_title(answer) == title


def test_title_model_is_checked_where_it_is_written(tmp_path: Path) -> None:
    text = _config("http://127.0.0.1:9", agent_extra="    title_model: nowhere/x\n")
    path = tmp_path / "config.yaml"
    with pytest.raises(ConfigError) as caught:
        parse_config(text, path, Home(tmp_path))
    assert str(caught.value) == (
        f"{path}:9: agents.main.title_model: provider 'nowhere' is not defined (providers: fake)"
    )
    text = _config("http://127.0.0.1:9", extra="title_model: one-word\n")
    with pytest.raises(ConfigError) as caught:
        parse_config(text, path, Home(tmp_path))
    assert str(caught.value).startswith(f"{path}:9: title_model: 'one-word' is not")


def test_the_title_chain_defaults_to_the_agents_and_is_empty_when_off(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    default = parse_config(_config("http://127.0.0.1:9"), path, Home(tmp_path))
    assert [str(r) for r in default.agent("main").title_chain] == ["fake/gpt-fake"]
    top_off = parse_config(
        _config("http://127.0.0.1:9", extra="title_model: off\n"), path, Home(tmp_path)
    )
    assert top_off.agent("main").title_chain == []
    agent_wins = parse_config(
        _config(
            "http://127.0.0.1:9",
            extra="title_model: off\n",
            agent_extra="    title_model: fake/tiny\n",
        ),
        path,
        Home(tmp_path),
    )
    assert [str(r) for r in agent_wins.agent("main").title_chain] == ["fake/tiny"]


@pytest.mark.parametrize("origin", ["api", "schedule", "webhook", "board"])
async def test_sessions_a_machine_starts_are_not_titled(
    model_server: FakeModelServer, runtime_factory: OpenRuntime, origin: str
) -> None:
    runtime = await runtime_factory(_config(model_server.base_url))
    runtime.start_workers(channels=False, maintenance=True)
    session = await runtime.sessions.new_session(None, origin=origin)
    model_server.script(Reply("Sure."))

    await _turn(runtime, session.id, FIRST)

    assert await runtime.queue.get(title_job_id(session.id)) is None
    assert len(model_server.requests) == 1
