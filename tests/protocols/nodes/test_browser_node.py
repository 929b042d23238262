"""A browser node: its invokes arrive as server-sent events at GET /nodes/events (the
node's name and secret in headers, as the dashboard and /app/pair.html send them) and
its results are posted to POST /nodes/result."""

from __future__ import annotations

import asyncio
import base64
import io
from pathlib import Path

from PIL import Image

from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.toolkit.approvals import ApprovalDecision, ApprovalRequest
from habakkuk.protocols.nodes.hub import NodeHub
from tests.conftest import mock_config
from tests.helpers import eventually, tool_context
from tests.protocols.nodes.conftest import NODES
from tests.protocols.nodes.helpers import new_code, redeem
from tests.server.conftest import ServeFactory, SSEReader


async def test_a_browser_node_gets_invokes_as_events_and_posts_results(
    serve: ServeFactory,
) -> None:
    served = await serve(mock_config(extra=NODES))
    hub = served.runtime.devices
    assert isinstance(hub, NodeHub)
    secret = (await redeem(served, await new_code(served), "phone"))["secret"]
    node = {"X-Habakkuk-Node": "phone", "Authorization": f"Bearer {secret}"}
    headers = {**node, "X-Habakkuk-Caps": "system.notify,camera.snap", "X-Habakkuk-Platform": "web"}
    async with served.client.get(served.url + "/nodes/events", headers=headers) as response:
        assert response.status == 200
        events = SSEReader(response)
        welcome = await events.next()
        assert welcome["event"] == "welcome" and welcome["data"]["name"] == "phone"
        listed = (await served.get_json("/api/nodes"))["nodes"]
        assert [(n["online"], n["platform"], n["caps"]) for n in listed] == [
            (True, "web", ["system.notify", "camera.snap"])
        ]
        call = asyncio.create_task(hub.invoke("phone", "camera.snap", {}, timeout=30))
        invoke = await events.next()
        assert invoke["event"] == "invoke" and invoke["data"]["command"] == "camera.snap"
        jpeg = b"\xff\xd8\xff\xe0fake"
        answer = {
            "id": invoke["data"]["id"],
            "result": {
                "text": "snapped",
                "files": [{"name": "cam.jpg", "data": base64.b64encode(jpeg).decode()}],
            },
        }
        async with served.client.post(
            served.url + "/nodes/result", json=answer, headers=node
        ) as posted:
            assert posted.status == 200, await posted.text()
        result = await call
        assert result.text == "snapped" and result.files[0].data == jpeg
        # A result for nothing waiting, and one with the wrong secret, are refused.
        async with served.client.post(
            served.url + "/nodes/result", json=answer, headers=node
        ) as posted:
            assert posted.status == 404
        wrong = {**node, "Authorization": "Bearer not-the-secret"}
        async with served.client.post(
            served.url + "/nodes/result", json=answer, headers=wrong
        ) as posted:
            assert posted.status == 401
        # Revoked from the dashboard: the stream ends with a closing event.
        async with served.client.delete(
            served.url + "/api/nodes/phone", headers=served.auth()
        ) as deleted:
            assert deleted.status == 200
        closed = await events.next()
        assert closed["event"] == "closed"
    await eventually(lambda: "phone" not in hub.live, what="the browser node gone")


async def test_a_browser_node_with_a_wrong_secret_gets_no_stream(serve: ServeFactory) -> None:
    served = await serve(mock_config(extra=NODES))
    await redeem(served, await new_code(served), "phone")
    bad = {"X-Habakkuk-Node": "phone", "Authorization": "Bearer wrong"}
    async with served.client.get(served.url + "/nodes/events", headers=bad) as response:
        assert response.status == 401


async def test_an_image_a_node_sends_is_saved_in_the_workspace_and_shown_to_the_model(
    serve: ServeFactory, tmp_path: Path
) -> None:
    served = await serve(mock_config(extra=NODES))
    secret = (await redeem(served, await new_code(served), "phone"))["secret"]
    node = {"X-Habakkuk-Node": "phone", "Authorization": f"Bearer {secret}"}
    picture = io.BytesIO()
    Image.new("RGB", (40, 30), (200, 10, 10)).save(picture, format="PNG")
    ctx = tool_context(tmp_path, mode="full")
    call = ToolUseBlock("t1", "node_invoke", {"node": "phone", "command": "camera.snap"})
    headers = {**node, "X-Habakkuk-Caps": "camera.snap"}
    async with served.client.get(served.url + "/nodes/events", headers=headers) as response:
        events = SSEReader(response)
        assert (await events.next())["event"] == "welcome"
        # camera.snap is not in nodes.allow for phone: the approver is asked first.
        person = AllowAll()
        ctx.approver = person
        running = asyncio.create_task(
            served.runtime.tools.call_with_media(call, ctx, {"node_invoke"})
        )
        invoke = await events.next()
        data = base64.b64encode(picture.getvalue()).decode()
        answer = {
            "id": invoke["data"]["id"],
            "result": {"text": "", "files": [{"name": "../../snap.png", "data": data}]},
        }
        async with served.client.post(
            served.url + "/nodes/result", json=answer, headers=node
        ) as posted:
            assert posted.status == 200
        done = await running
    assert not done.result.is_error, done.result.text
    saved = ctx.workspace / "nodes" / "phone" / "snap.png"  # the name's folders dropped
    assert saved.read_bytes() == picture.getvalue()
    assert "40 x 30 px" in done.result.text
    assert [block.media_type for block in done.media] == ["image/png"]
    assert person.asked == ["run camera.snap on device phone"]


class AllowAll:
    """An approver that allows every call, keeping each summary."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.append(request.summary)
        return ApprovalDecision("allow_once")
