"""Context compaction: the estimate, the cut, the record and the model's view of it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.agent.compaction import (
    SUMMARY_SYSTEM,
    choose_cut,
    compact,
    estimate_text_tokens,
    estimate_tokens,
    render_messages,
    summary_input,
)
from habakkuk.engine.config import AgentConfig, parse_config, resolve_compact_at
from habakkuk.engine.errors import ConfigError, LeaseLost
from habakkuk.engine.llm.router import Caller, RouterResult
from habakkuk.engine.llm.types import (
    ImageBlock,
    Message,
    ModelRequest,
    OpaqueBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from habakkuk.engine.retention import prune_idle_sessions
from habakkuk.engine.sessions import SUMMARY_PREFIX, TranscriptStore
from tests.fakes.model_server import Fail, FakeModelServer, Reply, ToolCall


@pytest.fixture
def store(transcripts_on: TranscriptStore) -> TranscriptStore:
    """The transcripts on each engine: these tests are the store's contract on both."""
    return transcripts_on


def user(text: str) -> Message:
    return Message.user_text(text)


def assistant(text: str, *calls: str) -> Message:
    blocks: list[Any] = [TextBlock(text)] if text else []
    blocks += [ToolUseBlock(c, "exec", {"command": "ls"}) for c in calls]
    return Message("assistant", blocks)


def results(*calls: str, text: str = "ok") -> Message:
    return Message("user", [ToolResultBlock(c, text) for c in calls])


async def fill(store: TranscriptStore, session: str, messages: list[Message]) -> None:
    await store.create_session(session, "main", "PROMPT")
    for message in messages:
        await store.append(session, message, turn_id="t")


# -- the estimate ----------------------------------------------------------------------


def test_latin_text_is_about_four_characters_a_token() -> None:
    assert estimate_text_tokens("a" * 400) == 100
    assert estimate_text_tokens("") == 0


def test_cjk_text_is_about_one_and_a_half_characters_a_token() -> None:
    assert estimate_text_tokens("漢" * 300) == 200
    assert estimate_text_tokens("한" * 3) == 2


def test_each_message_adds_four_tokens_of_envelope() -> None:
    assert estimate_tokens([user("a" * 40), assistant("b" * 40)]) == 10 + 4 + 10 + 4


def test_tool_calls_results_and_media_count() -> None:
    image = Message("user", [ImageBlock("image/png", blob="x")])
    assert estimate_tokens([image]) > 1000
    big_result = results("c1", text="x" * 4000)
    assert estimate_tokens([big_result]) == 1004


# -- the cut ---------------------------------------------------------------------------


def turn(text: str, size: int = 400) -> list[Message]:
    """A turn of about `size` x 3 characters: question, call, result, answer."""
    call = f"call-{text}"
    return [
        user(f"{text} " + "q" * size),
        assistant("", call),
        results(call, text="r" * size),
        assistant("a" * size),
    ]


def test_cut_keeps_as_many_whole_recent_turns_as_fit() -> None:
    messages = turn("one") + turn("two") + turn("three") + turn("four")
    one_turn = estimate_tokens(turn("x"))
    cut = choose_cut(messages, budget=one_turn * 2 + 5)
    assert cut == 8  # turns three and four kept
    assert messages[cut].text.startswith("three")


def test_cut_always_keeps_the_last_turn_even_when_nothing_fits() -> None:
    messages = turn("one") + turn("two", size=100)
    assert choose_cut(messages, budget=estimate_tokens(turn("two", size=100))) == 4
    # A last turn over budget is cut inside, never dropped whole.
    assert choose_cut(turn("one") + turn("two", size=4000), budget=10) > 4


def test_cut_never_separates_a_tool_call_from_its_result() -> None:
    messages = turn("one") + turn("two") + turn("three")
    cuts = {choose_cut(messages, budget) for budget in range(1, estimate_tokens(messages) + 10, 7)}
    assert len(cuts) > 2  # the budgets reach several different cuts
    for cut in cuts:
        assert not messages[cut].tool_results  # the kept part never opens with results


def test_a_single_turn_over_budget_is_cut_before_an_assistant_message() -> None:
    messages = [
        user("do the big thing"),
        assistant("", "c1"),
        results("c1", text="x" * 8000),
        assistant("", "c2"),
        results("c2", text="y" * 400),
        assistant("done"),
    ]
    cut = choose_cut(messages, budget=200)
    assert cut == 3  # keeps call c2, its result and the answer; folds the huge c1 output
    assert messages[cut].role == "assistant"
    # When even the smallest tail is over budget, the last assistant message is kept.
    assert choose_cut(messages, budget=1) == 5


def test_nothing_to_fold_when_the_conversation_is_its_last_turn() -> None:
    assert choose_cut(turn("only"), budget=10_000) == 0
    assert choose_cut([], budget=10) == 0


# -- rendering -------------------------------------------------------------------------


def test_rendering_uses_placeholders_and_cuts_long_tool_output() -> None:
    text = render_messages(
        [
            Message("user", [TextBlock("look at this"), ImageBlock("image/png", name="cat.png")]),
            Message(
                "assistant",
                [
                    ThinkingBlock("secret reasoning", signature="sig"),
                    OpaqueBlock("anthropic", {"type": "web_search_tool_result", "x": "y" * 50}),
                    ToolUseBlock("c1", "read_file", {"path": "/etc/hosts"}),
                ],
            ),
            results("c1", text="z" * 10_000),
        ]
    )
    assert "[image: cat.png]" in text
    assert "[web search results]" in text and "yyyy" not in text
    assert "secret reasoning" not in text
    assert "/etc/hosts" in text
    assert "more characters cut" in text and len(text) < 3_000


def test_summary_input_holds_the_previous_summary_and_keeps_the_newest_text() -> None:
    folded = [user("old " + "o" * 5000), user("new question about /srv/app.py")]
    text = summary_input("PREVIOUS FACTS", folded, max_chars=2000)
    assert "PREVIOUS FACTS" in text
    assert "/srv/app.py" in text
    assert "earlier characters left out" in text
    assert len(text) < 2300


def test_summary_prompt_asks_for_what_must_survive() -> None:
    for words in ("goals", "decisions", "facts about the user", "promised", "paths, URLs"):
        assert words in SUMMARY_SYSTEM


# -- config ------------------------------------------------------------------------------


def config_text(provider_type: str, extra: str = "") -> str:
    return (
        f"providers:\n  p:\n    type: {provider_type}\n    key_env: K\n"
        f"agents:\n  main:\n    model: p/m\n{extra}"
    )


def test_compact_at_defaults_by_the_main_models_provider(tmp_path: Path) -> None:
    from habakkuk.engine.home import Home

    home = Home(tmp_path)
    anthropic = parse_config(config_text("anthropic"), tmp_path / "c.yaml", home)
    assert resolve_compact_at(anthropic, anthropic.agents["main"]) == 600_000
    openai = parse_config(config_text("openai"), tmp_path / "c.yaml", home)
    assert resolve_compact_at(openai, openai.agents["main"]) == 150_000
    off = parse_config(config_text("openai", "    compact_at: -1\n"), tmp_path / "c.yaml", home)
    assert resolve_compact_at(off, off.agents["main"]) == -1
    set_ = parse_config(config_text("openai", "    compact_at: 5000\n"), tmp_path / "c.yaml", home)
    assert resolve_compact_at(set_, set_.agents["main"]) == 5000
    assert AgentConfig(model="p/m").compact_at is None


def test_a_tiny_compact_at_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    from habakkuk.engine.home import Home

    with pytest.raises(ConfigError, match=r"c\.yaml:\d+: agents\.main\.compact_at: must be -1"):
        parse_config(
            config_text("openai", "    compact_at: 10\n"), tmp_path / "c.yaml", Home(tmp_path)
        )


# -- the record and the view -------------------------------------------------------------


async def test_the_view_is_the_summary_then_the_kept_messages(store: TranscriptStore) -> None:
    await fill(store, "s", turn("one") + turn("two"))
    assert await store.add_compaction("s", "THE SUMMARY", 4, 7, None)
    view = (await store.load_for_model("s")).messages
    assert view[0].role == "user" and view[0].text == SUMMARY_PREFIX + "THE SUMMARY"
    assert view[1].text.startswith("two")
    assert len(view) == 5
    # The full transcript is still there for show, export and search.
    assert len(await store.messages("s")) == 8
    assert [h.seq for h in await store.search("one")] == [0]
    latest = await store.latest_compaction("s")
    assert latest is not None
    assert (latest.first_kept_seq, latest.transcript_len) == (4, 8)


async def test_the_latest_compaction_wins(store: TranscriptStore) -> None:
    await fill(store, "s", turn("one") + turn("two") + turn("three"))
    assert await store.add_compaction("s", "FIRST", 4, 11, None)
    assert await store.add_compaction("s", "SECOND", 8, 11, None)
    view = (await store.load_for_model("s")).messages
    assert view[0].text.endswith("SECOND") and view[1].text.startswith("three")


async def test_the_write_is_refused_when_the_transcript_moved(store: TranscriptStore) -> None:
    await fill(store, "s", turn("one") + turn("two"))
    await store.append("s", user("a new message"))
    assert not await store.add_compaction("s", "STALE", 4, 7, None)
    assert await store.latest_compaction("s") is None


async def test_a_lost_lease_writes_nothing(store: TranscriptStore) -> None:
    await fill(store, "s", turn("one") + turn("two"))

    def lost(conn: Any) -> None:
        raise LeaseLost("job t: lease lost")

    with pytest.raises(LeaseLost):
        await store.add_compaction("s", "SUMMARY", 4, 7, lost)
    assert await store.latest_compaction("s") is None


async def test_fork_copies_the_compactions_that_cover_the_copy(store: TranscriptStore) -> None:
    await fill(store, "s", turn("one") + turn("two") + turn("three"))
    assert await store.add_compaction("s", "UP TO TWO", 4, 11, None)
    assert await store.add_compaction("s", "UP TO THREE", 8, 11, None)
    whole = await store.fork("s", "whole")
    assert whole.id == "whole"
    latest = await store.latest_compaction("whole")
    assert latest is not None and latest.summary == "UP TO THREE"
    # A copy that ends inside turn two keeps only the summary of turn one.
    await store.fork("s", "part", upto_seq=6)
    latest = await store.latest_compaction("part")
    assert latest is not None and latest.summary == "UP TO TWO"
    assert latest.transcript_len == 7
    view = (await store.load_for_model("part")).messages
    assert view[0].text.endswith("UP TO TWO") and view[1].text.startswith("two")
    # A copy that ends before a summary's cut has none of it.
    await store.fork("s", "early", upto_seq=2)
    assert await store.latest_compaction("early") is None


async def test_retention_deletes_a_sessions_compactions(store: TranscriptStore) -> None:
    await fill(store, "s", turn("one") + turn("two"))
    assert await store.add_compaction("s", "SUMMARY", 4, 7, None)
    await store.db.write(
        lambda conn: conn.execute("UPDATE sessions SET updated_at = ?", (time.time() - 10 * 86400,))
    )
    assert await prune_idle_sessions(store, 5) == ["s"]
    rows = await store.db.fetchall("SELECT * FROM compactions")
    assert rows == []


# -- compacting with a model ---------------------------------------------------------------


class FakeRouter:
    """Answers every call with `summary` and records the requests."""

    def __init__(self, summary: str = "SUMMARY: user wants /srv/app fixed") -> None:
        self.summary = summary
        self.requests: list[ModelRequest] = []
        self.callers: list[Caller] = []

    async def complete(self, chain: Any, request: ModelRequest, **kw: Any) -> RouterResult:
        self.requests.append(request)
        self.callers.append(kw["caller"])
        return RouterResult(
            Message("assistant", [TextBlock(self.summary)]), Usage(10, 5), chain[0], "end_turn"
        )


async def compact_s(store: TranscriptStore, router: Any, **options: Any) -> Any:
    """compact() of session "s" at compact_at 2000, as the tests below run it."""
    from habakkuk.engine.config import ModelRef

    return await compact(
        store,
        router,
        session_id="s",
        chain=[ModelRef("p", "m")],
        caller=Caller("main", "s", "compaction"),
        compact_at=2000,
        guard=None,
        system="PROMPT",
        **options,
    )


async def test_compact_folds_older_turns_with_the_previous_summary(
    store: TranscriptStore,
) -> None:

    await fill(store, "s", turn("one") + turn("two") + turn("three"))
    assert await store.add_compaction("s", "OLD SUMMARY", 4, 11, None)
    router = FakeRouter()
    outcome = await compact_s(store, router)
    assert outcome.compacted and outcome.dropped == 4
    assert outcome.tokens_after < outcome.tokens_before
    request = router.requests[0]
    assert request.system == SUMMARY_SYSTEM and request.tools == []
    prompt = request.messages[0].text
    assert "OLD SUMMARY" in prompt and "two" in prompt and "three q" not in prompt
    assert router.callers[0].purpose == "compaction"
    view = (await store.load_for_model("s")).messages
    assert view[0].text.endswith(router.summary) and view[1].text.startswith("three")
    assert "Compacted the context" in outcome.describe()


async def test_compact_with_nothing_to_fold_makes_no_call(store: TranscriptStore) -> None:

    await fill(store, "s", turn("only"))
    router = FakeRouter()
    outcome = await compact_s(store, router)
    assert not outcome.compacted and router.requests == []
    assert "only its last turn" in outcome.describe()


async def test_compact_writes_nothing_when_the_conversation_moved_meanwhile(
    store: TranscriptStore,
) -> None:
    """A message appended while the summary is written (another turn, a crash-resumed
    one) makes the record stale: it is refused and the session stays as it was."""

    await fill(store, "s", turn("one") + turn("two"))

    class MovingRouter(FakeRouter):
        async def complete(self, chain: Any, request: ModelRequest, **kw: Any) -> RouterResult:
            await store.append("s", user("meanwhile"))
            return await super().complete(chain, request, **kw)

    outcome = await compact_s(store, MovingRouter())
    assert not outcome.compacted and "moved on" in outcome.reason
    assert await store.latest_compaction("s") is None


# -- in a turn, against a model server -------------------------------------------------------


def remote_config(url: str, compact_at: int | None) -> str:
    setting = f"    compact_at: {compact_at}\n" if compact_at is not None else ""
    return (
        "providers:\n"
        f"  remote:\n    type: openai\n    base_url: {url}/v1\n    key_env: REMOTE_KEY\n"
        "agents:\n  main:\n    model: remote/gpt-fake\n    mode: full\n" + setting
    )


def request_texts(recorded: Any) -> list[str]:
    """The text of each message of a recorded Chat Completions request."""
    texts = []
    for message in recorded.json["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        texts.append(f"{message['role']}: {content or ''}")
    return texts


async def seeded(runtime: Any, turns: int, size: int) -> str:
    session = await runtime.sessions.new_session("main")
    history: list[tuple[str, str]] = []
    for index in range(turns):
        history += [("user", f"question {index} " + "q" * size), ("assistant", f"answer {index}")]
    await runtime.sessions.seed_session(session.id, history)
    return str(session.id)


@pytest.fixture
def srv(model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    """The fake OpenAI-compatible model server `remote_config` points at."""
    monkeypatch.setenv("REMOTE_KEY", "k")
    return model_server


async def serving(
    runtime_factory: Any,
    srv: FakeModelServer,
    compact_at: int,
    *,
    turns: int,
    size: int,
    script: Sequence[Any],
) -> tuple[Any, str]:
    """A runtime on `srv` with workers running and a session of `turns` seeded questions
    of `size` characters; the server answers the next calls with `script`."""
    runtime = await runtime_factory(remote_config(srv.base_url, compact_at))
    session = await seeded(runtime, turns=turns, size=size)
    srv.script(*script)
    runtime.start_workers()
    return runtime, session


async def test_a_turn_over_compact_at_compacts_before_its_model_call(
    runtime_factory: Any, srv: FakeModelServer
) -> None:
    # compact_at leaves room above the system prompt and the default tools' specs (about
    # 5,000 tokens, counted after compaction too), which grow as tools join the default;
    # each question is bigger than a fifth of it, so none is kept verbatim.
    runtime, session = await serving(
        runtime_factory,
        srv,
        8000,
        turns=6,
        size=7000,
        script=[Reply(text="SUMMARY: six questions about q"), Reply(text="the answer")],
    )
    with runtime.bus.subscribe(lambda e: e.kind == "turn.compaction") as events:
        outcome = await runtime.turns.wait_turn(
            await runtime.turns.submit(session, "next question")
        )
        event = await asyncio.wait_for(events.get(), 5)
    summary_call, turn_call = srv.requests
    assert outcome.status == "done" and outcome.reply == "the answer"
    summarize = request_texts(summary_call)
    assert summarize[0] == "system: " + SUMMARY_SYSTEM
    assert "question 0" in summarize[1] and "question 5" in summarize[1]
    assert "tools" not in summary_call.json
    sent = request_texts(turn_call)
    assert sent[1] == "user: " + SUMMARY_PREFIX + "SUMMARY: six questions about q"
    assert "next question" in sent[-1]
    assert not any("question 5 " in text for text in sent)  # folded, not sent verbatim
    assert event.data["tokens_before"] >= 8000 > event.data["tokens_after"]
    assert event.data["dropped"] == 12 and event.data["turn"] == outcome.turn
    # The transcript keeps everything; the record says where the summary applies.
    assert len(await runtime.sessions.messages(session)) == 14
    record = await runtime.transcripts.latest_compaction(session)
    assert record.first_kept_seq == 12 and record.transcript_len == 13


async def test_the_previous_calls_prompt_size_triggers_compaction_mid_turn(
    runtime_factory: Any, srv: FakeModelServer
) -> None:
    """The estimate of the seeded view is under compact_at; the first reply's usage says
    the prompt was 25,000 tokens, so the turn compacts before its second call."""
    runtime, session = await serving(
        runtime_factory,
        srv,
        20_000,
        turns=3,
        size=9000,
        script=[
            Reply(tool_calls=[ToolCall("list_dir", {"path": "."})], input_tokens=25_000),
            Reply(text="SUMMARY: three questions"),
            Reply(text="listed"),
        ],
    )
    outcome = await runtime.turns.wait_turn(await runtime.turns.submit(session, "list the files"))
    first, summary_call, last = srv.requests
    assert outcome.reply == "listed"
    assert request_texts(summary_call)[0] == "system: " + SUMMARY_SYSTEM
    assert any("question 0" in t for t in request_texts(first))
    sent = request_texts(last)
    assert sent[1].endswith("SUMMARY: three questions")
    assert not any("question 0" in t or "question 1" in t for t in sent)
    assert "question 2" in sent[2]  # the turns that fit a fifth of compact_at stay
    assert "list the files" in sent[4] and sent[5].startswith("assistant")
    assert sent[6].startswith("tool")  # the call kept its result


async def test_context_overflow_compacts_once_and_retries_below_the_threshold(
    runtime_factory: Any, srv: FakeModelServer
) -> None:
    runtime, session = await serving(
        runtime_factory,
        srv,
        20_000,
        turns=3,
        size=9000,
        script=[
            Fail(400, kind="context_overflow"),
            Reply(text="SUMMARY: three short questions"),
            Reply(text="answered"),
        ],
    )
    outcome = await runtime.turns.wait_turn(await runtime.turns.submit(session, "go on"))
    overflowed, summary_call, retried = srv.requests
    assert outcome.status == "done" and outcome.reply == "answered"
    assert any("question 0" in t for t in request_texts(overflowed))
    assert request_texts(summary_call)[0] == "system: " + SUMMARY_SYSTEM
    assert request_texts(retried)[1].endswith("SUMMARY: three short questions")
    assert not any("question 0" in t for t in request_texts(retried))


async def test_a_second_overflow_after_compacting_fails_the_turn(
    runtime_factory: Any, srv: FakeModelServer
) -> None:
    runtime, session = await serving(
        runtime_factory,
        srv,
        20_000,
        turns=3,
        size=9000,
        script=[
            Fail(400, kind="context_overflow"),
            Reply(text="SUMMARY"),
            Fail(400, kind="context_overflow"),
        ],
    )
    outcome = await runtime.turns.wait_turn(await runtime.turns.submit(session, "go on"))
    assert len(srv.requests) == 3
    assert outcome.status == "failed" and "context_overflow" in (outcome.error or "")


async def test_compaction_off_leaves_a_context_overflow_to_fail(
    runtime_factory: Any, srv: FakeModelServer
) -> None:
    runtime, session = await serving(
        runtime_factory, srv, -1, turns=30, size=2000, script=[Fail(400, kind="context_overflow")]
    )
    outcome = await runtime.turns.wait_turn(await runtime.turns.submit(session, "go on"))
    assert len(srv.requests) == 1  # no summary call, though far over any default
    assert outcome.status == "failed"
    assert await runtime.transcripts.latest_compaction(session) is None


async def test_compact_session_runs_as_a_turn_and_says_what_it_did(
    runtime_factory: Any, srv: FakeModelServer
) -> None:
    # Off for turns, /compact still works (with the provider's default budget).
    runtime, session = await serving(
        runtime_factory,
        srv,
        -1,
        turns=40,
        size=4000,
        script=[Reply(text="SUMMARY: forty questions")],
    )
    outcome = await runtime.turns.wait_turn(await runtime.turns.compact_session(session))
    assert len(srv.requests) == 1
    again = await runtime.turns.wait_turn(await runtime.turns.compact_session(session))
    assert outcome.status == "done" and outcome.reply.startswith("Compacted the context")
    record = await runtime.transcripts.latest_compaction(session)
    assert record is not None and record.summary == "SUMMARY: forty questions"
    assert len(await runtime.sessions.messages(session)) == 80  # no message was appended
    assert again.reply.startswith("Nothing was compacted")


async def test_compact_appends_what_carry_keeps_from_the_folded_part(
    store: TranscriptStore,
) -> None:
    """`carry` sees the previous summary then the folded messages; its text ends the summary."""

    await fill(store, "s", turn("one") + turn("two") + turn("three"))
    assert await store.add_compaction("s", "OLD SUMMARY", 4, 11, None)
    seen: list[list[str]] = []

    def carry(folded: Any) -> str:
        seen.append([m.text for m in folded])
        return "[callable now: mcp__gh__create_issue]"

    outcome = await compact_s(store, FakeRouter(), carry=carry)
    assert outcome.compacted
    (folded,) = seen
    assert folded[0].endswith("OLD SUMMARY") and folded[1].startswith("two")
    assert not any(text.startswith("three") for text in folded)
    latest = await store.latest_compaction("s")
    assert latest is not None
    assert latest.summary.endswith(
        "user wants /srv/app fixed\n\n[callable now: mcp__gh__create_issue]"
    )
