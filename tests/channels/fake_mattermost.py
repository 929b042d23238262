"""A fake Mattermost on 127.0.0.1, per its API v4 documentation: REST with
`Authorization: Bearer <token>` (`GET /api/v4/users/me`, `GET /api/v4/users/<id>`,
`POST /api/v4/posts` answered 201, `POST /api/v4/files` multipart answered 201 with
`file_infos`, `GET /api/v4/files/<id>`, `GET /api/v4/channels/<id>/posts?since=`
answering `{order, posts}`, `GET /api/v4/users/me/channels` listing the bot's channels
with their `last_post_at`) and the WebSocket at `/api/v4/websocket` (a `hello` event,
the `authentication_challenge` action answered `{status: OK, seq_reply}`, `posted`
events whose `data.post` is a JSON string, `ping` actions answered `pong`). A test can
hold sends (to kill a process mid-reply), drop every socket (a server restart) and post
while no socket is there.

Interactive message buttons as the real server has them: a post's
`props.attachments[].actions[]` are kept, but their `integration` (URL and context) is
stripped from every post a client sees; `press` does what the server does when someone
presses one (POSTs the PostActionIntegrationRequest JSON to the integration URL with
the action's stored context, then applies the answer's `update` and keeps its
`ephemeral_text`); `PUT /api/v4/posts/<id>/patch` replaces a post's message or props.
`POST /api/v4/posts` drops a second create with the same `pending_post_id` within 30
seconds and answers the post the first made (the server's seenPendingPostIdsCache).

`MattermostDriver` plays Alice in a direct message with the bot.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import WSMsgType, web

from tests.helpers import eventually

BOT_ID, BOT_USER = "botuserid000000000000000001", "habakkuk"
ALICE_ID, ALICE = "aliceuserid0000000000000001", "alice"
TOKEN = "mm-bot-access-token-0123456789abcdef"
DM_CHANNEL = "dmchannelid00000000000000001"
TOWN = "towncenterid0000000000000001"
USERS = {BOT_ID: BOT_USER, ALICE_ID: ALICE}
TYPES = {DM_CHANNEL: "D", TOWN: "O"}
PENDING_POST_SECONDS = 30.0  # the server's pendingPostIDsCacheTTL


def _without_integrations(props: dict[str, Any]) -> dict[str, Any]:
    """A post's props as a client sees them: no action's integration (the server's
    Post.StripActionIntegrations)."""
    out: dict[str, Any] = json.loads(json.dumps(props))
    for attachment in out.get("attachments") or []:
        for action in attachment.get("actions") or []:
            action.pop("integration", None)
    return out


@dataclass
class Post:
    """One post in a channel."""

    id: str
    channel_id: str
    user_id: str
    message: str
    root_id: str = ""
    file_ids: list[str] = field(default_factory=list)
    create_at: int = 0
    edit_at: int = 0
    props: dict[str, Any] = field(default_factory=dict)

    def actions(self) -> list[dict[str, Any]]:
        """The post's buttons, with their integrations (the server's own view)."""
        return [
            action
            for attachment in self.props.get("attachments") or []
            for action in attachment.get("actions") or []
        ]

    def wire(self, fake: FakeMattermost) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id, "create_at": self.create_at,
            "update_at": max(self.create_at, self.edit_at), "edit_at": self.edit_at,
            "delete_at": 0, "user_id": self.user_id,
            "channel_id": self.channel_id, "root_id": self.root_id, "original_id": "",
            "message": self.message, "type": "", "props": _without_integrations(self.props),
            "hashtags": "", "file_ids": self.file_ids, "pending_post_id": "", "metadata": {},
        }  # fmt: skip
        if self.file_ids:
            out["metadata"]["files"] = [fake.files[f].info for f in self.file_ids]
        return out


@dataclass
class File:
    """One uploaded file."""

    id: str
    name: str
    media_type: str
    data: bytes

    @property
    def info(self) -> dict[str, Any]:
        return {
            "id": self.id, "user_id": ALICE_ID, "name": self.name, "size": len(self.data),
            "mime_type": self.media_type, "extension": self.name.rsplit(".", 1)[-1],
        }  # fmt: skip


class FakeMattermost:
    """The fake server (`async with`)."""

    def __init__(self) -> None:
        self.posts: list[Post] = []
        self.types = dict(TYPES)  # the channels the bot is in, by id: their type
        self.listings = 0  # GET /api/v4/users/me/channels calls
        self.files: dict[str, File] = {}
        self.challenges: list[str] = []  # the token of each authentication challenge
        self.authenticated = 0
        self.fetches: list[tuple[str, int]] = []  # each catch-up: channel, since
        self.pings = 0
        self.sends = 0
        self.ephemerals: list[str] = []  # each press answer's ephemeral_text
        self.press_statuses: list[int] = []  # the integration's status of each press
        self.refuse_token = False  # authentication challenges fail (a revoked token)
        self.lose_answers = 0  # created posts whose answer is lost (the connection drops)
        self.deduplicated = 0  # creates answered with the post of an earlier one
        self._pending: dict[str, tuple[str, float]] = {}  # pending_post_id: post id, when
        self._ids = itertools.count(1)
        self._clock = int(time.time() * 1000)
        self._sockets: set[web.WebSocketResponse] = set()
        self._hold_after: int | None = None
        self._hold_stored = False
        self._released = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> FakeMattermost:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/api/v4/websocket", self._websocket)
        app.router.add_get("/api/v4/users/{id}", self._user)
        app.router.add_get("/api/v4/users/{id}/channels", self._channels)
        app.router.add_post("/api/v4/posts", self._post)
        app.router.add_put("/api/v4/posts/{id}/patch", self._patch)
        app.router.add_post("/api/v4/files", self._upload)
        app.router.add_get("/api/v4/files/{id}", self._file)
        app.router.add_get("/api/v4/channels/{id}/posts", self._since)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._released.set()
        await self.drop_sockets()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- the test's hand ---------------------------------------------------------------

    def _id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):025d}"

    def _now(self) -> int:
        """Milliseconds, strictly increasing (two posts never share a create_at)."""
        self._clock = max(self._clock + 1, int(time.time() * 1000))
        return self._clock

    async def say(
        self,
        text: str,
        *,
        channel: str = DM_CHANNEL,
        root_id: str = "",
        file: tuple[str, str, bytes] | None = None,
    ) -> Post:
        """Alice posts in a channel the bot is in."""
        file_ids = []
        if file is not None:
            stored = File(self._id("f"), *file)
            self.files[stored.id] = stored
            file_ids.append(stored.id)
        post = Post(self._id("p"), channel, ALICE_ID, text, root_id, file_ids, self._now())
        await self._store(post)
        return post

    def open_direct(self) -> str:
        """Someone opens a new direct message with the bot: its channel id."""
        channel = self._id("d")
        self.types[channel] = "D"
        return channel

    async def again(self, post: Post) -> None:
        """Send a post's `posted` event once more (a duplicate delivery)."""
        await self._emit(post)

    async def edit(self, post: Post, text: str) -> None:
        """Alice edits a post: a `post_edited` event, and its update_at moves."""
        post.message, post.edit_at = text, self._now()
        await self._emit(post, "post_edited")

    def of(self, channel: str = DM_CHANNEL) -> list[Post]:
        return [p for p in self.posts if p.channel_id == channel]

    def forget_pending(self) -> None:
        """Thirty seconds pass: the server no longer knows the pending post ids it saw."""
        self._pending.clear()

    def hold_sends_after(self, count: int, *, stored: bool = False) -> None:
        """Answer no send after the first `count` (they hang until `release`); with
        `stored`, a held post is stored first (the server took it, the answer is lost)."""
        self._hold_after = count
        self._hold_stored = stored
        self._released.clear()

    def release(self) -> None:
        self._hold_after = None
        self._released.set()

    @property
    def connected(self) -> int:
        return len(self._sockets)

    async def drop_sockets(self) -> None:
        for ws in list(self._sockets):
            await ws.close()

    def press_request(self, label: str, user_id: str = ALICE_ID) -> tuple[str, dict[str, Any]]:
        """What the server sends when `user_id` presses the button named `label` on the
        newest post that has one: the integration URL and the PostActionIntegrationRequest
        (with the context the server kept and a fresh trigger id)."""
        for post in reversed(self.posts):
            action = next((a for a in post.actions() if a.get("name") == label), None)
            if action is not None:
                break
        else:
            raise AssertionError(f"no post has a button {label!r}")
        integration = action.get("integration") or {}
        request = {
            "user_id": user_id, "user_name": USERS.get(user_id, ""),
            "channel_id": post.channel_id, "channel_name": "dm", "team_id": "",
            "team_domain": "", "post_id": post.id, "trigger_id": self._id("t"),
            "type": "", "data_source": "", "context": integration.get("context") or {},
        }  # fmt: skip
        return str(integration.get("url") or ""), request

    async def press(self, label: str, user_id: str = ALICE_ID) -> int:
        """Someone presses the button named `label` (see press_request); the status."""
        return await self.send_press(*self.press_request(label, user_id))

    async def send_press(self, url: str, request: dict[str, Any] | bytes) -> int:
        """POST a press to `url` as the server does, apply the answer's `update` and keep
        its `ephemeral_text`; the integration's status."""
        body = request if isinstance(request, bytes) else json.dumps(request).encode()
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=body, headers={"Content-Type": "application/json"}) as response,
        ):
            status = response.status
            answer = await response.json(content_type=None) if status == 200 else None
        self.press_statuses.append(status)
        if isinstance(answer, dict):
            if answer.get("ephemeral_text"):
                self.ephemerals.append(str(answer["ephemeral_text"]))
            update = answer.get("update")
            posted = [p for p in self.posts if isinstance(request, dict)
                      and p.id == request.get("post_id")]  # fmt: skip
            if isinstance(update, dict) and posted:
                await self._apply(posted[0], update)
        return status

    async def _apply(self, post: Post, patch: dict[str, Any]) -> None:
        """Replace the message and props a patch names; clients see a post_edited."""
        if "message" in patch:
            post.message = str(patch["message"])
        if isinstance(patch.get("props"), dict):
            post.props = dict(patch["props"])
        post.edit_at = self._now()
        await self._emit(post, "post_edited")

    async def wait_for(self, predicate: Any, timeout: float = 20.0) -> None:
        await eventually(predicate, what="the fake Mattermost", timeout=timeout)

    # -- the server ----------------------------------------------------------------------

    async def _store(self, post: Post) -> None:
        self.posts.append(post)
        await self._emit(post)

    async def _emit(self, post: Post, kind: str = "posted") -> None:
        mentions = [uid for uid, name in USERS.items() if f"@{name}" in post.message]
        data: dict[str, Any] = {
            "channel_display_name": "dm", "channel_name": "dm",
            "channel_type": self.types[post.channel_id], "post": json.dumps(post.wire(self)),
            "sender_name": f"@{USERS[post.user_id]}", "team_id": "",
        }  # fmt: skip
        if mentions:
            data["mentions"] = json.dumps(mentions)
        event = {
            "event": kind, "data": data, "seq": 0,
            "broadcast": {"omit_users": None, "user_id": "", "channel_id": post.channel_id,
                          "team_id": ""},
        }  # fmt: skip
        for ws in list(self._sockets):
            with contextlib.suppress(ConnectionError, RuntimeError):
                await ws.send_json(event)

    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {TOKEN}"

    @staticmethod
    def _error(status: int, message: str, error_id: str) -> web.Response:
        body = {"id": error_id, "message": message, "request_id": "r", "status_code": status}
        return web.json_response(body, status=status)

    def _unauthorized(self) -> web.Response:
        return self._error(401, "Invalid or expired session, please login again.",
                           "api.context.session_expired.app_error")  # fmt: skip

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        seq = itertools.count(0)
        await ws.send_json(
            {"event": "hello", "data": {"server_version": "9.11.0"}, "seq": next(seq),
             "broadcast": {"user_id": "", "channel_id": "", "team_id": ""}}
        )  # fmt: skip
        try:
            async for frame in ws:
                if frame.type != WSMsgType.TEXT:
                    break
                message = json.loads(frame.data)
                action = message.get("action")
                if action == "authentication_challenge":
                    token = message.get("data", {}).get("token", "")
                    self.challenges.append(token)
                    if token != TOKEN or self.refuse_token:
                        await ws.send_json(
                            {"status": "FAIL", "seq_reply": message["seq"],
                             "error": {"id": "api.web_socket_router.not_authenticated.app_error",
                                       "message": "authentication failed"}}
                        )  # fmt: skip
                        continue
                    await ws.send_json({"status": "OK", "seq_reply": message["seq"]})
                    self._sockets.add(ws)
                    self.authenticated += 1
                elif action == "ping":
                    self.pings += 1
                    await ws.send_json(
                        {"status": "OK", "seq_reply": message["seq"],
                         "data": {"text": "pong", "version": "9.11.0"}}
                    )  # fmt: skip
        finally:
            self._sockets.discard(ws)
        return ws

    async def _user(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        user_id = request.match_info["id"]
        user_id = BOT_ID if user_id == "me" else user_id
        if user_id not in USERS:
            return self._error(404, "Unable to find the user.", "app.user.missing_account.const")
        return web.json_response(
            {"id": user_id, "username": USERS[user_id], "first_name": USERS[user_id].title(),
             "is_bot": user_id == BOT_ID, "delete_at": 0}
        )  # fmt: skip

    async def _channels(self, request: web.Request) -> web.Response:
        """GET /api/v4/users/me/channels: every channel the bot is a member of, in all
        teams, direct and group messages included (server 6.1 and later)."""
        if not self._authorized(request):
            return self._unauthorized()
        if request.match_info["id"] not in ("me", BOT_ID):
            return self._error(403, "You do not have the appropriate permissions.",
                               "api.context.permissions.app_error")  # fmt: skip
        self.listings += 1
        listed = []
        for channel, kind in self.types.items():
            posted = [p.create_at for p in self.of(channel)]
            listed.append(
                {"id": channel, "type": kind, "team_id": "" if kind in "DG" else "team1",
                 "name": channel, "display_name": "", "create_at": 1, "update_at": 1,
                 "delete_at": 0, "last_post_at": max(posted, default=1),
                 "last_root_post_at": max(posted, default=1), "total_msg_count": len(posted)}
            )  # fmt: skip
        return web.json_response(listed)

    async def _held(self) -> bool:
        self.sends += 1
        if self._hold_after is not None and self.sends > self._hold_after:
            await self._released.wait()
            return True
        return False

    async def _post(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        body = await request.json()
        if body.get("channel_id") not in self.types:
            return self._error(403, "You do not have the appropriate permissions.",
                               "api.context.permissions.app_error")  # fmt: skip
        pending = str(body.get("pending_post_id") or "")
        seen = self._pending.get(pending) if pending else None
        if seen is not None and time.monotonic() - seen[1] < PENDING_POST_SECONDS:
            [found] = [p for p in self.posts if p.id == seen[0]]
            self.deduplicated += 1
            return web.json_response(found.wire(self), status=201)
        if not self._hold_stored and await self._held():
            return self._error(500, "held", "held")
        post = Post(
            self._id("b"),
            body["channel_id"],
            BOT_ID,
            body.get("message", ""),
            body.get("root_id", ""),
            list(body.get("file_ids") or []),
            self._now(),
            props=dict(body.get("props") or {}),
        )
        await self._store(post)
        if pending:
            self._pending[pending] = (post.id, time.monotonic())
        if self._hold_stored and await self._held():
            return self._error(500, "held", "held")
        if self.lose_answers > 0:  # created, but the answer never reaches the client
            self.lose_answers -= 1
            assert request.transport is not None
            request.transport.close()
        return web.json_response(post.wire(self), status=201)

    async def _patch(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        found = [p for p in self.posts if p.id == request.match_info["id"]]
        if not found:
            return self._error(404, "Unable to find the post.", "app.post.get.app_error")
        if found[0].user_id != BOT_ID:
            return self._error(403, "You do not have the appropriate permissions.",
                               "api.context.permissions.app_error")  # fmt: skip
        await self._apply(found[0], await request.json())
        return web.json_response(found[0].wire(self))

    async def _upload(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        form = await request.post()
        upload = form.get("files")
        if not isinstance(upload, web.FileField) or form.get("channel_id") not in self.types:
            return self._error(400, "Unable to upload file(s).", "api.file.upload_file.app_error")
        stored = File(self._id("f"), upload.filename, upload.content_type, upload.file.read())
        self.files[stored.id] = stored
        return web.json_response({"file_infos": [stored.info], "client_ids": []}, status=201)

    async def _file(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        stored = self.files.get(request.match_info["id"])
        if stored is None:
            return self._error(404, "Unable to find the file.", "app.file_info.get.app_error")
        return web.Response(body=stored.data, content_type=stored.media_type)

    async def _since(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        channel, since = request.match_info["id"], int(request.query["since"])
        self.fetches.append((channel, since))
        if channel not in self.types:
            return self._error(403, "You do not have the appropriate permissions.",
                               "api.context.permissions.app_error")  # fmt: skip
        # the posts created, edited or deleted since (Mattermost's `since` is update_at)
        posts = [p for p in self.of(channel) if max(p.create_at, p.edit_at) > since]
        return web.json_response(
            {"order": [p.id for p in reversed(posts)],
             "posts": {p.id: p.wire(self) for p in posts},
             "next_post_id": "", "prev_post_id": ""}
        )  # fmt: skip


class MattermostDriver:
    """Alice in a direct message with the bot on the fake Mattermost; the buttons call
    back our HTTP server (so the table starts it: `called_at`)."""

    kind = "mattermost"
    has_buttons = True

    def __init__(self, fake: FakeMattermost):
        self.fake = fake
        self.url = ""

    def called_at(self, url: str) -> None:
        """Our server's `/channels/<account>`: where the buttons' presses must go."""
        self.url = url

    def channel_yaml(self, name: str) -> str:
        return (
            f"type: mattermost\nbase_url: {self.fake.base_url}\n"
            f'token_env: MATTERMOST_TEST_TOKEN\nallow_from: ["{ALICE}"]\n'
        )

    def env(self) -> dict[str, str]:
        return {"MATTERMOST_TEST_TOKEN": TOKEN}

    async def say(self, text: str) -> None:
        await self.fake.say(text)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        await self.fake.say(caption, file=(name, media_type, data))

    async def press(self, label: str) -> None:
        post = next(p for p in reversed(self.fake.posts) if p.actions())
        assert all(a["integration"]["url"].startswith(self.url + "/") for a in post.actions())
        assert await self.fake.press(label) == 200

    def texts(self) -> list[str]:
        return [p.message for p in self.fake.of() if p.user_id == BOT_ID and not p.file_ids]

    def files(self) -> list[tuple[str, bytes]]:
        return [
            (self.fake.files[f].name, self.fake.files[f].data)
            for p in self.fake.of()
            if p.user_id == BOT_ID
            for f in p.file_ids
        ]
