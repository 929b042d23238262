"""/a2a over raw HTTP: cards, the token, the spec's error codes, streams and resubscribe."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import aiohttp
import pytest

from tests.helpers import eventually
from tests.server.conftest import SSEReader

from .helpers import a2a_config


def _rpc(method: str, params: Any, request_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def _send_v03(text: str, message_id: str = "m-1", **message: Any) -> dict[str, Any]:
    body = {
        "kind": "message",
        "messageId": message_id,
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
        **message,
    }
    return _rpc("message/send", {"message": body})


def _send_v1(text: str, message_id: str = "m-1", **params: Any) -> dict[str, Any]:
    body = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    return _rpc("SendMessage", {"message": body, **params})


async def _post(served: Any, body: Any, *, version: str | None = None) -> Any:
    data = body if isinstance(body, bytes) else None
    extra = {"A2A-Version": version} if version else {}
    async with served.client.post(
        served.url + "/a2a",
        json=None if data is not None else body,
        data=data,
        headers={**served.auth(**extra), "Content-Type": "application/json"},
    ) as response:
        assert response.status == 200, (response.status, await response.text())
        return await response.json()


async def test_cards_are_public_in_both_shapes_and_each_agent_has_its_own(serve: Any) -> None:
    served = await serve(a2a_config(extra="  agents:\n    main: Answers questions.\n"))
    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.get(served.url + "/.well-known/agent-card.json") as response:
            assert response.status == 200
            v03 = await response.json()
        async with anonymous.get(
            served.url + "/.well-known/agent-card.json", headers={"A2A-Version": "1.0"}
        ) as response:
            v1 = await response.json()
        async with anonymous.get(served.url + "/a2a/main") as response:
            own = await response.json()
        async with anonymous.get(served.url + "/a2a/nobody") as response:
            assert response.status == 404
    assert v03["url"] == served.url + "/a2a" and v03["preferredTransport"] == "JSONRPC"
    assert v03["security"] == [{"bearer": []}]
    assert v03["skills"][0]["description"] == "Answers questions."
    assert {"url": served.url + "/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"} in (
        v03["supportedInterfaces"]
    )
    assert "url" not in v1 and v1["securityRequirements"] == [{"schemes": {"bearer": {"list": []}}}]
    assert own["name"] == "main" and own["url"] == served.url + "/a2a/main"
    # A 0.3 reader (the SDK's 0.3 card model) takes the 0.3 card as it is.
    from a2a.compat.v0_3 import types as v03_types

    assert v03_types.AgentCard.model_validate(v03).url == served.url + "/a2a"


async def test_a_call_needs_the_token(serve: Any) -> None:
    served = await serve(a2a_config())
    async with served.client.post(
        served.url + "/a2a", json=_send_v03("hi"), headers={"Authorization": "Bearer wrong"}
    ) as response:
        assert response.status == 401
        assert (await response.json())["error"]["code"] == -32600


async def test_a2a_token_env_replaces_the_http_token(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("A2A_TEST_TOKEN", "a2a-secret")
    served = await serve(a2a_config(extra="  token_env: A2A_TEST_TOKEN\n"))
    async with served.client.post(
        served.url + "/a2a", json=_send_v03("hi"), headers=served.auth()
    ) as response:
        assert response.status == 401
    async with served.client.post(
        served.url + "/a2a", json=_send_v03("hi"), headers={"Authorization": "Bearer a2a-secret"}
    ) as response:
        body = await response.json()
    assert body["result"]["status"]["state"] == "completed"


async def test_a_new_client_context_starts_a_session_under_that_id(serve: Any) -> None:
    served = await serve(a2a_config())
    first = await _post(served, _send_v03("one", "m-1", contextId="client-ctx-1"))
    second = await _post(served, _send_v03("two", "m-2", contextId="client-ctx-1"))
    assert first["result"]["contextId"] == second["result"]["contextId"] == "client-ctx-1"
    texts = [m.message.text for m in await served.runtime.sessions.messages("client-ctx-1")]
    assert texts == ["one", "Echo: one", "two", "Echo: two"]
    listed = await _post(served, _rpc("ListTasks", {"contextId": "client-ctx-1", "pageSize": 1}))
    page = listed["result"]
    assert page["totalSize"] == 2 and page["pageSize"] == 1 and page["nextPageToken"] == "1"
    assert page["tasks"][0]["id"] == second["result"]["id"]
    assert "artifacts" not in page["tasks"][0]
    rest = await _post(served, _rpc("ListTasks", {"contextId": "client-ctx-1", "pageToken": "1"}))
    assert [t["id"] for t in rest["result"]["tasks"]] == [first["result"]["id"]]
    assert rest["result"]["nextPageToken"] == ""


async def test_a_loopback_server_without_a_token_asks_none(serve: Any) -> None:
    served = await serve(a2a_config(), token=False)
    body = await _post(served, _send_v1("hi"))
    assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", -32700),
        (b"[1, 2]", -32600),
        ({"jsonrpc": "1.0", "id": 1, "method": "message/send"}, -32600),
        ({"jsonrpc": "2.0", "id": {"x": 1}, "method": "message/send"}, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": 7}, -32600),
        (_rpc("tasks/explode", {}), -32601),
        (_rpc("message/send", "not an object"), -32602),
        (_rpc("message/send", {"message": {"role": "user", "parts": []}}), -32602),
        (_rpc("SendMessage", {"message": {"messageId": "m", "role": "ROLE_USER"}}), -32602),
        (_send_v03("hi", role="agent"), -32602),
        (_send_v03("hi", taskId="task-1"), -32001),
        (_rpc("tasks/get", {"id": "no-such-task"}), -32001),
        (_rpc("GetTask", {}), -32602),
        (_rpc("CancelTask", {"id": "no-such-task"}), -32001),
        (_rpc("tasks/pushNotificationConfig/set", {"taskId": "t"}), -32003),
        (_rpc("CreateTaskPushNotificationConfig", {"taskId": "t"}), -32003),
        (_rpc("GetExtendedAgentCard", {}), -32004),
        (_rpc("ListTasks", {"pageSize": 0}), -32602),
        (_rpc("ListTasks", {"status": "TASK_STATE_SLEEPY"}), -32602),
        (_rpc("ListTasks", {"pageToken": "not-ours"}), -32602),
        (_rpc("ListTasks", {"statusTimestampAfter": "yesterday"}), -32602),
        (_send_v03("hi", contextId="../not/an/id"), -32602),
        (
            _rpc(
                "SendMessage",
                {
                    "message": {
                        "messageId": "m",
                        "role": "ROLE_USER",
                        "parts": [{"raw": "AAAA", "mediaType": "image/png"}],
                    }
                },
            ),
            -32005,
        ),
    ],
)
async def test_hostile_requests_get_the_spec_error_codes_never_a_500(
    serve: Any, body: Any, code: int
) -> None:
    served = await serve(a2a_config())
    answer = await _post(served, body)
    assert answer["error"]["code"] == code, answer
    assert answer["jsonrpc"] == "2.0"
    if isinstance(body, dict) and body.get("id") == 1:
        assert answer["id"] == 1  # the request's id comes back with its error


async def test_a_bad_a2a_version_header_is_refused(serve: Any) -> None:
    served = await serve(a2a_config())
    answer = await _post(served, _send_v1("hi"), version="2.7")
    assert answer["error"]["code"] == -32009
    fine = await _post(served, _send_v03("hi", "m-2"), version="0.3")
    assert fine["result"]["kind"] == "task"


async def test_text_files_and_data_become_the_turns_text(serve: Any) -> None:
    served = await serve(a2a_config())
    note = base64.b64encode(b"the note").decode()
    parts = [
        {"text": "look"},
        {"data": {"k": 1}},
        {"url": "https://example.org/a.pdf", "filename": "a.pdf", "mediaType": "application/pdf"},
        {"raw": note, "filename": "n.txt", "mediaType": "text/plain"},
    ]
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": parts}
    answer = await _post(served, _rpc("SendMessage", {"message": message}))
    task = answer["result"]["task"]
    sent = task["history"][0]["parts"][0]["text"]
    assert "look" in sent and '"k": 1' in sent and "https://example.org/a.pdf" in sent
    assert "the note" in sent


async def test_return_immediately_answers_before_the_turn_ends(serve: Any) -> None:
    served = await serve(a2a_config())
    answer = await _post(served, _send_v1("slow one", configuration={"returnImmediately": True}))
    task = answer["result"]["task"]
    assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    await _post(served, _rpc("CancelTask", {"id": task["id"]}))


async def test_a_disconnected_stream_leaves_the_turn_running_and_resubscribe_follows_it(
    serve: Any,
) -> None:
    served = await serve(a2a_config())
    gate = served.runtime.config.agents["main"].workspace_path / "gate"
    body = _send_v03("wait at the gate")
    body["method"] = "message/stream"
    async with served.client.post(
        served.url + "/a2a", json=body, headers=served.auth()
    ) as response:
        reader = SSEReader(response)
        first = (await reader.next())["data"]["result"]
        assert first["kind"] == "task"
        task_id = first["id"]
    # Gone mid-turn: the job goes on, waiting at the gate.
    job = await served.runtime.queue.get(task_id)
    assert job is not None and job.status in ("queued", "running")
    async with served.client.post(
        served.url + "/a2a",
        json=_rpc("tasks/resubscribe", {"id": task_id}),
        headers=served.auth(),
    ) as response:
        reader = SSEReader(response)
        assert (await reader.next())["data"]["result"]["kind"] == "task"
        gate.parent.mkdir(parents=True, exist_ok=True)
        gate.touch()
        frames: list[dict[str, Any]] = []
        while not frames or not frames[-1].get("final"):
            frames.append((await reader.next())["data"]["result"])
    artifact = next(f for f in frames if f["kind"] == "artifact-update")
    assert artifact["artifact"]["parts"][0]["text"] == "Waiting.\n\nThrough."
    assert frames[-1]["status"]["state"] == "completed"
    ended = await _post(served, _rpc("tasks/resubscribe", {"id": task_id}, 7))
    assert ended["error"]["code"] == -32004 and ended["id"] == 7


async def test_resubscribe_to_a_running_task_sends_its_end(serve: Any) -> None:
    served = await serve(a2a_config())
    gate = served.runtime.config.agents["main"].workspace_path / "gate"
    started = await _post(
        served, _send_v1("wait at the gate", configuration={"returnImmediately": True})
    )
    task_id = started["result"]["task"]["id"]
    async with served.client.post(
        served.url + "/a2a", json=_rpc("SubscribeToTask", {"id": task_id}), headers=served.auth()
    ) as response:
        reader = SSEReader(response)
        frames = [(await reader.next())["data"]["result"]]
        gate.parent.mkdir(parents=True, exist_ok=True)
        gate.touch()
        await _until_final(reader, frames)
    assert "task" in frames[0]
    assert any("artifactUpdate" in f for f in frames)


async def test_a_metadata_agent_picks_the_agent_and_an_unknown_one_is_refused(
    serve: Any,
) -> None:
    served = await serve(a2a_config())
    unknown = _send_v03("hi", metadata={"agent": "ghost"})
    answer = await _post(served, unknown)
    assert answer["error"]["code"] == -32602 and "ghost" in answer["error"]["message"]
    named = await _post(served, _send_v03("hi", "m-2", metadata={"agent": "main"}))
    assert named["result"]["status"]["state"] == "completed"


async def test_a_quiet_stream_sends_keepalives(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from habakkuk.server import a2a_stream

    monkeypatch.setattr(a2a_stream, "KEEPALIVE_SECONDS", 0.05)
    served = await serve(a2a_config())
    gate = served.runtime.config.agents["main"].workspace_path / "gate"
    body = _send_v1("wait at the gate")
    body["method"] = "SendStreamingMessage"
    async with served.client.post(
        served.url + "/a2a", json=body, headers=served.auth()
    ) as response:
        reader = SSEReader(response)
        frames = [(await reader.next())["data"]["result"]]
        rest = asyncio.create_task(_until_final(reader, frames))
        await eventually(lambda: "keepalive" in reader.comments, what="a keepalive")
        gate.parent.mkdir(parents=True, exist_ok=True)
        gate.touch()
        await rest
    assert "task" in frames[0]
    assert frames[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def _until_final(reader: SSEReader, frames: list[dict[str, Any]]) -> None:
    while True:
        result = (await reader.next(timeout=60))["data"]["result"]
        frames.append(result)
        update = result.get("statusUpdate")
        if update and update["status"]["state"] == "TASK_STATE_COMPLETED":
            return
