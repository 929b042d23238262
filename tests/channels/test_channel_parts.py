"""Channel parts on their own: formatting, config, the supervisor, leases, reply sweeps."""

from __future__ import annotations

import asyncio
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from habakkuk.channels.adapter import Adapter, Address, Beat, Button, Inbox
from habakkuk.channels.deliveries import enqueue_reply, reply_id
from habakkuk.channels.format import html_to_plain, markdown_chunks, render_inline
from habakkuk.channels.store import ChannelStatus, ChannelStore
from habakkuk.channels.supervisor import Backoff, Supervisor
from habakkuk.channels.sweep import sweep_replies
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import MIGRATIONS, JobQueue
from habakkuk.engine.store import Database, SqliteDatabase
from tests.conftest import mock_config
from tests.helpers import eventually

# -- formatting ---------------------------------------------------------------------------


def test_markdown_becomes_telegram_html() -> None:
    [html] = markdown_chunks(
        "# Plan\n\n**bold** and *it* and `a<b` and [site](https://e.com)\n"
        "- one\n- two\n\n> quoted\n\n```py\nif a < b:\n    pass\n```\nsnake_case_name stays"
    )
    assert html.startswith("<b>Plan</b>")
    assert "<b>bold</b> and <i>it</i> and <code>a&lt;b</code>" in html
    assert '<a href="https://e.com">site</a>' in html
    assert "• one\n• two" in html
    assert "<blockquote>quoted</blockquote>" in html
    assert '<pre><code class="language-py">if a &lt; b:\n    pass</code></pre>' in html
    assert "snake_case_name stays" in html


def _balanced(html: str) -> bool:
    stack: list[str] = []
    for closing, name in re.findall(r"<(/?)([a-z]+)[^>]*>", html):
        if closing:
            if not stack or stack.pop() != name:
                return False
        else:
            stack.append(name)
    return not stack


LONG_TEXTS = {
    "words": "word " * 3000,
    "one-word": "x" * 10_000,
    "escapes": "<&>" * 3000,
    "code": "```\n" + "\n".join(f"line <{i}> **not bold**" for i in range(1500)) + "\n```",
    "paragraphs": "\n\n".join(f"**para {i}** " + "text " * 150 for i in range(40)),
}


@pytest.mark.parametrize("markdown", list(LONG_TEXTS.values()), ids=list(LONG_TEXTS))
def test_chunks_fit_the_limit_keep_tags_balanced_and_lose_nothing(markdown: str) -> None:
    chunks = markdown_chunks(markdown)
    assert len(chunks) > 1
    assert all(0 < len(c) <= 4096 for c in chunks)
    assert all(_balanced(c) for c in chunks)
    plain = " ".join(html_to_plain(c) for c in chunks)

    def letters(text: str) -> str:
        return "".join(re.sub(r"```|\*\*", "", text).split())

    assert letters(plain) == letters(markdown)
    assert markdown_chunks(markdown) == chunks  # deterministic, so deliveries can resume


@pytest.mark.parametrize(
    "markdown", ["***both***", "**a ~~b** c~~", "*a **b* c**", "**a *b* c**", "_x **y_ z**"]
)
def test_overlapping_markup_still_gives_balanced_tags(markdown: str) -> None:
    [html] = markdown_chunks(markdown)
    assert _balanced(html), html


def test_inline_markup_does_not_touch_identifiers_or_math() -> None:
    assert render_inline("a_b_c and 2*3*4") == "a_b_c and 2*3*4"


def test_an_address_round_trips_and_rejects_junk() -> None:
    assert str(Address.parse("tg:-1001:7")) == "tg:-1001:7"
    assert Address.parse("tg:42") == Address("tg", "42", "")
    for bad in ("tg", "tg:", ":42", "a:b:c:d"):
        with pytest.raises(ValueError):
            Address.parse(bad)


# -- config -------------------------------------------------------------------------------


def _parse(home: Home, channel: str) -> Any:
    text = mock_config(
        extra="channels:\n  tg:\n" + textwrap.indent(textwrap.dedent(channel), "    ")
    )
    return parse_config(text, home.config_path, home)


def test_channel_config_defaults_and_durations(home: Home) -> None:
    config = _parse(home, "type: telegram\ntoken_env: TG\nsession_idle: 30m\nallow_from: '*'\n")
    channel: ChannelConfig = config.channels["tg"]
    assert channel.session_idle_seconds == 1800
    assert channel.allow_all and channel.name == "tg"
    assert channel.groups == "mention" and channel.progress and not channel.reactions


def test_email_channel_tls_false_means_plain_connections(home: Home) -> None:
    config = _parse(
        home,
        "type: email\nimap: 127.0.0.1:143\nsmtp: 127.0.0.1:25\nusername: bot\n"
        "password_env: MAIL_PASSWORD\naddress: bot@example.org\ntls: false\n",
    )
    assert config.channels["tg"].tls_mode == "plain"


@pytest.mark.parametrize(
    ("channel", "message"),
    [
        ("type: telegram\n", r"channels\.tg\.token_env: a telegram channel needs this"),
        ("type: telegram\ntoken_env: 'A B'\n", r"token_env: 'A B' is not a variable name"),
        ("type: pigeon\ntoken_env: X\n", r"channels\.tg\.type: must be one of telegram"),
        ("type: slack\ntoken_env: X\n", r"token_env: is not a setting of a slack channel"),
        ("type: slack\napp_token_env: A\n", r"bot_token_env: a slack channel needs this"),
        ("type: telegram\ntoken_env: X\nimap: h:1\n", r"imap: is not a setting of a tele"),
        (
            "type: matrix\nhomeserver: http://h\nuser_id: bot\ntoken_env: T\n",
            r"user_id: 'bot' is not a Matrix id",
        ),
        ("type: signal\nbase_url: http://h\naccount: '12'\n", r"account: '12' is not a ph"),
        (
            "type: email\nimap: mail\nsmtp: m:25\nusername: u\npassword_env: P\naddress: a@b\n",
            r"channels\.tg\.imap: 'mail' is not host:port",
        ),
        ("type: email\nimap: m:1\n", r"channels\.tg\.smtp: an email channel needs"),
        ("type: telegram\ntoken_env: X\nagent: ghost\n", r"agent 'ghost' is not defined"),
        ("type: telegram\ntoken_env: X\nsession_idle: soon\n", r"session_idle: 'soon' is not"),
        ("type: telegram\ntoken_env: X\nbase_url: ftp://x\n", r"base_url: 'ftp://x' is not"),
        ("type: telegram\ntoken_env: X\ntoken: abc\n", r"channels\.tg\.token: unknown key"),
        ("type: telegram\ntoken_env: X\nroutes: [{agent: main}]\n", r"give chat or user"),
        ("type: telegram\ntoken_env: X\nsilent_limit: 5s\n", r"longer than poll_timeout"),
    ],
)
def test_channel_config_errors_name_the_line_and_key(
    home: Home, channel: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        _parse(home, channel)
    assert re.match(r".*config\.yaml:\d+: ", str(caught.value))


# -- the supervisor -------------------------------------------------------------------------


class ScriptedAdapter(Adapter):
    """Beats once, then does what the test says: go silent, fail, or keep beating (a
    keepalive every 0.1 s, well within the 1.2 s silent limit)."""

    type = "fake"

    def __init__(self, account: str, behaviour: str, runs: list[str]):
        super().__init__(account)
        self.behaviour = behaviour
        self.runs = runs

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        self.runs.append(self.behaviour)
        beat()
        if self.behaviour == "fail":
            raise ConnectionError("server went away")
        while self.behaviour == "beat":
            await asyncio.sleep(0.1)  # the platform's keepalive period
            beat()
        await asyncio.Event().wait()  # connected, but never another beat

    def render(self, markdown: str) -> list[str]:
        return [markdown]

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        return "1"


@pytest.fixture
async def control(tmp_path: Path) -> Any:
    db = await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS)
    yield db
    await db.close()


def _channel(silent: str = "1.2s") -> ChannelConfig:
    channel = ChannelConfig(type="telegram", token_env="X", poll_timeout=1, silent_limit=silent)
    channel.name = "fake"
    channel.silent_limit_seconds = float(silent.rstrip("s"))
    return channel


async def _supervise(
    control: Database, make: Callable[[ChannelConfig], Adapter], *, owner: str = ""
) -> tuple[Supervisor, ChannelStore]:
    store = await ChannelStore.open(control)
    queue = JobQueue(control)

    async def inbox(message: Any) -> None:
        return None

    class Deliveries:
        async def run(self, lease: Any) -> dict[str, Any]:
            return {}

    supervisor = Supervisor(
        {"fake": _channel()},
        make,
        store,
        queue,
        inbox,
        Deliveries(),  # type: ignore[arg-type]  # a stub with only the run it needs
        backoff=Backoff(first=0.01, cap=0.05, healthy=60),
        lease_seconds=1.5,
    )
    if owner:
        supervisor.owner = owner
    return supervisor, store


async def test_a_silent_adapter_is_torn_down_and_reconnected(control: Database) -> None:
    runs: list[str] = []
    supervisor, store = await _supervise(control, lambda c: ScriptedAdapter(c.name, "silent", runs))
    supervisor.start()
    try:
        await eventually(lambda: len(runs) >= 2, what="the adapter's second run", timeout=20)
    finally:
        await supervisor.stop()
    status = (await store.statuses())["fake"]
    assert status.restarts >= 1
    assert status.state == "stopped"


async def test_a_failing_adapter_is_restarted_with_backoff(control: Database) -> None:
    runs: list[str] = []
    supervisor, store = await _supervise(control, lambda c: ScriptedAdapter(c.name, "fail", runs))
    supervisor.start()
    try:
        await eventually(lambda: len(runs) >= 3, what="the adapter's third run", timeout=20)
        # Each new run overwrites the detail ("starting"): look while it backs off, bounded.
        seen: list[ChannelStatus] = []

        async def backing_off() -> bool:
            seen.append((await store.statuses())["fake"])
            return seen[-1].state == "backoff" and seen[-1].restarts >= 2

        await eventually(backing_off, what="the adapter to back off after 2 restarts", timeout=20)
        assert "server went away" in seen[-1].detail
    finally:
        await supervisor.stop()


async def test_only_one_process_holds_a_channel(control: Database) -> None:
    runs: list[str] = []
    first, store = await _supervise(
        control, lambda c: ScriptedAdapter(c.name, "silent", runs), owner="host:1:aaaa"
    )
    other_runs: list[str] = []
    second, _ = await _supervise(
        control, lambda c: ScriptedAdapter(c.name, "silent", other_runs), owner="host:2:bbbb"
    )
    first.start()
    await eventually(lambda: len(runs) == 1, what="the first supervisor's run", timeout=20)
    second.start()
    try:
        holder = await store.acquire_lease("channel:fake", "host:3:cccc", 1.5)
        assert holder == "host:1:aaaa"
        await first.stop()  # lets the lease go: the standby takes over
        await eventually(lambda: len(other_runs) >= 1, what="the standby to take over", timeout=20)
    finally:
        await first.stop()
        await second.stop()


async def test_a_standby_process_leaves_the_holders_record_alone(control: Database) -> None:
    runs: list[str] = []
    first, store = await _supervise(
        control, lambda c: ScriptedAdapter(c.name, "beat", runs), owner="host:1:aaaa"
    )
    other_runs: list[str] = []
    second, _ = await _supervise(
        control, lambda c: ScriptedAdapter(c.name, "beat", other_runs), owner="host:2:bbbb"
    )

    async def connected() -> bool:
        status = (await store.statuses()).get("fake")
        return status is not None and status.state == "connected"

    first.start()
    try:
        await eventually(connected, what="the first supervisor's adapter connected")
        second.start()
        await eventually(lambda: second.states()["fake"] == "standby", what="the standby")
        await second.stop()  # a standby stopping has nothing to record either
        status = (await store.statuses())["fake"]
        assert (status.state, status.holder) == ("connected", "host:1:aaaa")
        assert other_runs == []
    finally:
        await first.stop()
        await second.stop()
    assert (await store.statuses())["fake"].state == "stopped"  # the holder's own stop


# -- replies a crash left unqueued ----------------------------------------------------------


async def test_a_finished_channel_turn_without_a_reply_is_swept_once(control: Database) -> None:
    queue = JobQueue(control)
    reply_to = {"to": "tg:42", "message": "7"}
    await queue.enqueue("turn:tg:42:7", "turn", {"session": "s", "reply_to": reply_to})
    await queue.enqueue("turn:cli", "turn", {"session": "s"})
    for _ in range(2):
        lease = await queue.claim(["turn"])
        assert lease is not None
        await queue.complete(lease, {"reply": "hi"})
    assert await sweep_replies(queue, "turn") == 1
    assert await sweep_replies(queue, "turn") == 0
    job = await queue.get(reply_id("turn:tg:42:7"))
    assert job is not None and job.kind == "delivery:tg"
    assert job.payload == {"kind": "reply", "turn": "turn:tg:42:7", "to": "tg:42", "reply_to": "7"}
    turn = await queue.get("turn:tg:42:7")
    assert turn is not None
    assert await enqueue_reply(queue, turn) is False  # a rerun never queues a second reply
