"""The A2A server behaviours the conformance suite (a2a-tck) leans on, over raw HTTP:

a blocking send bounded by a2a.send_wait (the task answers still working, then reads,
lists and cancels as a live task), a message naming a task (-32001 unknown, -32004
finished or running), the extended card of each version (1.0 -32004, 0.3 -32007),
/a2a/ as /a2a (a client library that joins "/" to the endpoint posts there), and the
ErrorInfo a 1.0 A2A error carries in its data, and a JSON-RPC error (-32005) for a POST
the server refuses before reading it (a wrong Content-Type).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest
from a2a.utils.errors import TaskNotFoundError

from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from tests.helpers import eventually
from tests.server.a2a.helpers import a2a_config, sdk_client

WAIT = "  send_wait: 200ms\n"


def _rpc(method: str, params: Any, request_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def _send_v1(text: str, message_id: str, **message: Any) -> dict[str, Any]:
    body = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}], **message}
    return _rpc("SendMessage", {"message": body})


def _send_v03(text: str, message_id: str, **message: Any) -> dict[str, Any]:
    body = {
        "kind": "message",
        "messageId": message_id,
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
        **message,
    }
    return _rpc("message/send", {"message": body})


async def _post(served: Any, body: Any) -> Any:
    async with served.client.post(
        served.url + "/a2a", json=body, headers=served.auth()
    ) as response:
        assert response.status == 200, (response.status, await response.text())
        return await response.json()


async def _state(served: Any, task_id: str) -> str:
    answer = await _post(served, _rpc("GetTask", {"id": task_id}))
    return str(answer["result"]["status"]["state"])


async def test_a_blocking_send_past_send_wait_answers_the_task_still_working(serve: Any) -> None:
    served = await serve(a2a_config(extra=WAIT))
    answer = await _post(served, _send_v1("slow one", "m-slow"))  # no returnImmediately
    task = answer["result"]["task"]
    assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    job = await served.runtime.queue.get(task["id"])
    assert job is not None and not job.finished  # the turn goes on after the answer
    task_id = task["id"]

    async def working() -> bool:
        return await _state(served, task_id) == "TASK_STATE_WORKING"

    await eventually(working, what="the task working")
    listed = await _post(served, _rpc("ListTasks", {"status": "TASK_STATE_WORKING"}))
    assert task_id in [t["id"] for t in listed["result"]["tasks"]]
    cancelled = await _post(served, _rpc("CancelTask", {"id": task_id}))
    assert cancelled["result"]["status"]["state"] == "TASK_STATE_CANCELED"


async def test_a_blocking_send_within_send_wait_answers_the_finished_task(serve: Any) -> None:
    served = await serve(a2a_config(extra="  send_wait: 30s\n"))
    answer = await _post(served, _send_v03("hello", "m-quick"))
    assert answer["result"]["status"]["state"] == "completed"
    assert answer["result"]["artifacts"][0]["parts"][0]["text"] == "Echo: hello"


async def test_a_message_naming_a_task_a2a_never_started_is_task_not_found(serve: Any) -> None:
    served = await serve(a2a_config())
    answer = await _post(served, _send_v03("again", "m-2", taskId="no-such-task"))
    assert answer["error"]["code"] == -32001
    assert "no-such-task" in answer["error"]["message"]


async def test_a_message_to_a_finished_task_is_refused_and_points_at_its_context(
    serve: Any,
) -> None:
    served = await serve(a2a_config())
    first = await _post(served, _send_v1("hello", "m-1"))
    task = first["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    again = await _post(served, _send_v1("more", "m-2", taskId=task["id"]))
    assert again["error"]["code"] == -32004
    assert "completed" in again["error"]["message"] and "contextId" in again["error"]["message"]
    # The way on the refusal names: a new message in the task's context.
    follow = await _post(served, _send_v1("more", "m-3", contextId=task["contextId"]))
    assert follow["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert follow["result"]["task"]["contextId"] == task["contextId"]


async def test_a_message_to_a_running_task_is_refused_and_the_turn_goes_on(serve: Any) -> None:
    served = await serve(a2a_config(extra=WAIT))
    started = await _post(served, _send_v1("slow one", "m-slow"))
    task_id = started["result"]["task"]["id"]
    again = await _post(served, _send_v1("more", "m-2", taskId=task_id))
    assert again["error"]["code"] == -32004 and "still" in again["error"]["message"]
    assert await _state(served, task_id) in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    await _post(served, _rpc("CancelTask", {"id": task_id}))


@pytest.mark.parametrize(
    ("method", "code"),
    [("GetExtendedAgentCard", -32004), ("agent/getAuthenticatedExtendedCard", -32007)],
)
async def test_the_extended_card_is_refused_as_each_version_says(
    serve: Any, method: str, code: int
) -> None:
    served = await serve(a2a_config())
    answer = await _post(served, _rpc(method, {}, 9))
    assert answer["error"]["code"] == code and answer["id"] == 9


def test_send_wait_defaults_to_five_minutes_and_a_bad_one_names_its_line(tmp_path: Path) -> None:
    home = Home(tmp_path)
    config = parse_config(a2a_config() + "http: {}\n", home.config_path, home)
    assert config.a2a is not None and config.a2a.send_wait_seconds == 300.0
    with pytest.raises(ConfigError) as raised:
        text = a2a_config(extra="  send_wait: soon\n") + "http: {}\n"
        parse_config(text, home.config_path, home)
    assert "a2a.send_wait" in str(raised.value) and "soon" in str(raised.value)


async def test_the_endpoint_with_a_trailing_slash_is_the_same_endpoint(serve: Any) -> None:
    served = await serve(a2a_config())
    async with served.client.post(
        served.url + "/a2a/", json=_send_v1("hello", "m-slash"), headers=served.auth()
    ) as response:
        assert response.status == 200
        answer = await response.json()
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    async with served.client.post(served.url + "/a2a/", json=_rpc("GetTask", {"id": "x"})) as bare:
        assert bare.status == 401  # the token is asked there too


async def test_a_1_0_error_carries_its_error_info_and_a_0_3_one_does_not(serve: Any) -> None:
    served = await serve(a2a_config())
    v1 = await _post(served, _rpc("GetTask", {"id": "no-such-task"}))
    assert v1["error"]["code"] == -32001
    assert v1["error"]["data"] == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "TASK_NOT_FOUND",
            "domain": "a2a-protocol.org",
        }
    ]
    refused = await _post(served, _rpc("CancelTask", {"id": "no-such-task"}))
    assert refused["error"]["data"][0]["reason"] == "TASK_NOT_FOUND"
    v03 = await _post(served, _rpc("tasks/get", {"id": "no-such-task"}))
    assert v03["error"]["code"] == -32001 and "data" not in v03["error"]
    # A JSON-RPC error (not an A2A one) has none either.
    bad = await _post(served, _rpc("GetTask", {}))
    assert bad["error"]["code"] == -32602 and "data" not in bad["error"]


async def test_the_sdk_client_reads_a_1_0_error_as_its_own_error_type(serve: Any) -> None:
    served = await serve(a2a_config())
    async with sdk_client(served.url, served.token, "1.0") as (client, _card):
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="no-such-task"))


async def test_a_wrong_content_type_is_answered_as_a_json_rpc_error(serve: Any) -> None:
    served = await serve(a2a_config())
    body = b"{'jsonrpc': '2.0', 'method': 'SendMessage'}"
    headers = {**served.auth(), "Content-Type": "text/plain"}
    async with served.client.post(served.url + "/a2a", data=body, headers=headers) as response:
        assert response.status == 415
        v03 = await response.json()
    assert v03["jsonrpc"] == "2.0" and v03["id"] is None
    assert v03["error"]["code"] == -32005 and "application/json" in v03["error"]["message"]
    headers["A2A-Version"] = "1.0"
    async with served.client.post(served.url + "/a2a", data=body, headers=headers) as response:
        v1 = await response.json()
    assert v1["error"]["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    # The server's other paths keep their own shape.
    async with served.client.post(served.url + "/api/chat", data=body, headers=headers) as other:
        assert other.status == 415 and isinstance((await other.json())["error"], str)
