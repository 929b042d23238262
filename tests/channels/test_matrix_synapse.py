"""The Matrix adapter against a real Synapse homeserver (tests/channels/synapse_server.py):
the wire the fake imitates, checked where it matters most. The fake covers the error paths
and the rest (test_matrix_e2e.py)."""

from __future__ import annotations

import contextlib
import json
import secrets
import sqlite3
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from habakkuk.channels.adapter import Address
from habakkuk.channels.deliveries import SENDING, Sending
from habakkuk.channels.delivery_types import TextDelivery
from habakkuk.channels.matrix import MatrixAdapter
from habakkuk.channels.matrix_events import encode_id
from habakkuk.channels.store import ChannelStore
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.home import Home
from habakkuk.engine.store import SqliteDatabase
from habakkuk.engine.timeouts import wait_within
from habakkuk.runtime import Runtime
from tests.channels.synapse_server import Synapse, User, synapse_python
from tests.conftest import mock_config
from tests.fakes.media_gen import png
from tests.helpers import eventually

OpenRuntime = Callable[..., Awaitable[Runtime]]
PHOTO = png(4, 3)
BOUND = 30.0


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    """One Synapse for the session (each test registers its own users)."""
    python = synapse_python()
    if python is None:
        pytest.skip("matrix-synapse is not installed (.ci/run installs it: $HABAKKUK_TEST_SYNAPSE)")
    server = Synapse(python, tmp_path_factory.mktemp("synapse"))
    server.start()
    yield server
    server.stop()


class Person:
    """A Matrix user driven over the client-server API (aiohttp), following /sync."""

    def __init__(self, http: aiohttp.ClientSession, base: str, user: User):
        self.http = http
        self.base = base
        self.user = user
        self.since = ""
        self.timeline: dict[str, list[dict[str, Any]]] = {}

    async def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.user.token}"}
        async with self.http.request(
            method, f"{self.base}/_matrix/client/v3{path}", json=body, headers=headers
        ) as response:
            answer: dict[str, Any] = await response.json()
            assert response.status == 200, answer
            return answer

    async def direct_room_with(self, bot: str) -> str:
        created = await self.call(
            "POST",
            "/createRoom",
            {"preset": "trusted_private_chat", "invite": [bot], "is_direct": True},
        )
        return str(created["room_id"])

    async def say(self, room: str, text: str, **content: Any) -> str:
        body = {"msgtype": "m.text", "body": text, **content}
        txn = secrets.token_hex(8)
        path = f"/rooms/{quote(room)}/send/m.room.message/{txn}"
        return str((await self.call("PUT", path, body))["event_id"])

    async def upload(self, data: bytes, media_type: str, name: str) -> str:
        headers = {"Authorization": f"Bearer {self.user.token}", "Content-Type": media_type}
        async with self.http.post(
            f"{self.base}/_matrix/media/v3/upload",
            params={"filename": name},
            data=data,
            headers=headers,
        ) as response:
            return str((await response.json())["content_uri"])

    async def download(self, mxc: str) -> bytes:
        server, media = mxc.removeprefix("mxc://").split("/")
        headers = {"Authorization": f"Bearer {self.user.token}"}
        url = f"{self.base}/_matrix/client/v1/media/download/{server}/{media}"
        async with self.http.get(url, headers=headers) as response:
            assert response.status == 200
            return await response.read()

    async def _sync(self) -> None:
        query = {"timeout": "5000"} | ({"since": self.since} if self.since else {})
        answer = await self.call("GET", "/sync?" + "&".join(f"{k}={v}" for k, v in query.items()))
        self.since = str(answer["next_batch"])
        for room, data in answer.get("rooms", {}).get("join", {}).items():
            events = data.get("timeline", {}).get("events", [])
            self.timeline.setdefault(room, []).extend(events)

    async def wait_for(self, check: Callable[[], bool]) -> None:
        """Follow /sync until `check()` holds (bounded)."""

        async def follow() -> None:
            while not check():
                await self._sync()

        await wait_within(follow(), BOUND)

    def from_(self, room: str, sender: str, kind: str = "m.room.message") -> list[dict[str, Any]]:
        return [
            e for e in self.timeline.get(room, []) if e["sender"] == sender and e["type"] == kind
        ]


@pytest.fixture
async def people(
    synapse: Synapse, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[User, Person]]:
    """A fresh bot account ($MATRIX_TOKEN) and alice, who talks to it."""
    suffix = secrets.token_hex(3)
    bot = synapse.register(f"bot{suffix}")
    alice = synapse.register(f"alice{suffix}")
    monkeypatch.setenv("MATRIX_TOKEN", bot.token)
    async with aiohttp.ClientSession() as http:
        yield bot, Person(http, synapse.base_url, alice)


@pytest.fixture
def start(
    runtime_factory: Any, synapse: Synapse, people: tuple[User, Person], home: Home
) -> OpenRuntime:
    bot, alice = people

    async def _start(script: str = "- 'echo: {input}'") -> Runtime:
        channel = textwrap.dedent(
            f"""
            channels:
              mx:
                type: matrix
                homeserver: {synapse.base_url}
                user_id: "{bot.user_id}"
                token_env: MATRIX_TOKEN
                allow_from: ["{alice.user.user_id}"]
                poll_timeout: 1
            """
        )
        runtime: Runtime = await runtime_factory(mock_config(script, extra=channel))
        runtime.start_workers()
        assert runtime.channels is not None
        await runtime.channels.started()
        await eventually(lambda: saved_position(home), what="the first start's position")
        return runtime

    return _start


def saved_position(home: Home) -> str:
    with contextlib.closing(sqlite3.connect(home.db_path("control"))) as conn:
        found = conn.execute("SELECT value FROM channel_offsets WHERE account = 'mx'").fetchall()
    return str(found[0][0]) if found else ""


async def test_an_invite_is_joined_a_message_answered_quoting_it_and_a_thread_in_it(
    start: OpenRuntime, people: tuple[User, Person]
) -> None:
    bot, alice = people
    await start("- '**echo**: {input}'")
    room = await alice.direct_room_with(bot.user_id)
    await alice.wait_for(lambda: bool(alice.from_(room, bot.user_id, "m.room.member")))
    asked = await alice.say(room, "hello there")
    await alice.wait_for(lambda: bool(alice.from_(room, bot.user_id)))
    [reply] = alice.from_(room, bot.user_id)
    content = reply["content"]
    assert (content["body"], content["formatted_body"]) == (
        "echo: hello there",
        "<b>echo</b>: hello there",
    )
    assert content["m.relates_to"] == {"m.in_reply_to": {"event_id": asked}}

    relation = {"rel_type": "m.thread", "event_id": asked}
    inside = await alice.say(room, "about that", **{"m.relates_to": relation})
    await alice.wait_for(lambda: len(alice.from_(room, bot.user_id)) == 2)
    threaded = alice.from_(room, bot.user_id)[1]["content"]
    assert threaded["body"] == "echo: about that"
    assert threaded["m.relates_to"]["rel_type"] == "m.thread"
    assert threaded["m.relates_to"]["event_id"] == asked
    assert threaded["m.relates_to"]["m.in_reply_to"] == {"event_id": inside}


async def test_the_first_start_answers_nothing_already_there(
    start: OpenRuntime, people: tuple[User, Person], synapse: Synapse
) -> None:
    bot, alice = people
    room = await alice.direct_room_with(bot.user_id)
    synapse.request("POST", f"/_matrix/client/v3/join/{quote(room)}", {}, token=bot.token)
    await alice.say(room, "written before the bot started")
    await start()
    await alice.say(room, "now")
    await alice.wait_for(lambda: bool(alice.from_(room, bot.user_id)))
    assert [e["content"]["body"] for e in alice.from_(room, bot.user_id)] == ["echo: now"]


SEND_FILE = """
- text: "Sending it."
  tool_calls:
    - name: send_file
      arguments: {path: "report.txt", caption: "the report"}
- "sent"
"""


async def test_a_file_comes_in_through_authenticated_media_and_one_goes_out(
    start: OpenRuntime, people: tuple[User, Person], home: Home
) -> None:
    bot, alice = people
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True)
    (workspace / "report.txt").write_text("numbers\n")
    await start(SEND_FILE)
    room = await alice.direct_room_with(bot.user_id)
    await alice.wait_for(lambda: bool(alice.from_(room, bot.user_id, "m.room.member")))
    uri = await alice.upload(PHOTO, "image/png", "cat.png")
    image = {"url": uri, "filename": "cat.png", "info": {"mimetype": "image/png"}}
    await alice.say(room, "look", msgtype="m.image", **image)

    def answered() -> bool:
        return any(e["content"]["body"] == "sent" for e in alice.from_(room, bot.user_id))

    await alice.wait_for(answered)
    [saved] = (workspace / "inbox").iterdir()
    assert saved.name.endswith("-cat.png") and saved.read_bytes() == PHOTO
    [posted] = [e for e in alice.from_(room, bot.user_id) if e["content"]["msgtype"] == "m.file"]
    assert (posted["content"]["body"], posted["content"]["filename"]) == (
        "the report",
        "report.txt",
    )
    assert await alice.download(posted["content"]["url"]) == b"numbers\n"


async def test_a_resent_transaction_makes_no_second_event(
    people: tuple[User, Person], synapse: Synapse, tmp_path: Path
) -> None:
    bot, alice = people
    room = await alice.direct_room_with(bot.user_id)
    synapse.request("POST", f"/_matrix/client/v3/join/{quote(room)}", {}, token=bot.token)
    config = ChannelConfig(type="matrix", homeserver=synapse.base_url, user_id=bot.user_id)
    config.name = "mx"
    db = await SqliteDatabase.open(tmp_path / "control.db", [])
    adapter = MatrixAdapter(config, bot.token, ChannelStore(db), tmp_path / "state.json")
    to = Address("mx", encode_id(room))
    delivery = TextDelivery(to, "once")
    try:
        ids = []
        for chunk in (0, 0, 1):  # chunk 0 retried after a lost answer, then chunk 1
            token = SENDING.set(Sending("send:once", delivery, chunk=chunk))
            try:
                ids.append(await adapter.send_text(to, "once"))
            finally:
                SENDING.reset(token)
    finally:
        await adapter.close()
        await db.close()
    assert ids[0] == ids[1] != ids[2]
    await alice.wait_for(lambda: len(alice.from_(room, bot.user_id)) >= 2)
    assert [e["event_id"] for e in alice.from_(room, bot.user_id)] == [ids[0], ids[2]]
    assert json.dumps(alice.from_(room, bot.user_id)[0]["content"]).count("once") >= 1
