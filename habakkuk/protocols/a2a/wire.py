"""The A2A wire in both versions the spec names (1.0 and 0.3): methods, errors, objects.

1.0 (SendMessage, GetTask, ...): enums such as TASK_STATE_COMPLETED and ROLE_USER, parts
told apart by which of text, data, url, raw is set, results wrapped as {"task": ...}.
0.3 (message/send, tasks/get, ...): lowercase states and roles, a `kind` on every object,
a bare task as the result, `final` on the last status update. Everything here is plain
JSON in and out, so the server answers each call in its method's version.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
from dataclasses import dataclass
from typing import Any, Literal

Version = Literal["0.3", "1.0"]
Op = Literal["send", "stream", "get", "cancel", "subscribe", "push", "card", "list"]

# method -> (version, operation)
METHODS: dict[str, tuple[Version, Op]] = {
    "message/send": ("0.3", "send"),
    "message/stream": ("0.3", "stream"),
    "tasks/get": ("0.3", "get"),
    "tasks/cancel": ("0.3", "cancel"),
    "tasks/resubscribe": ("0.3", "subscribe"),
    "tasks/pushNotificationConfig/set": ("0.3", "push"),
    "tasks/pushNotificationConfig/get": ("0.3", "push"),
    "tasks/pushNotificationConfig/list": ("0.3", "push"),
    "tasks/pushNotificationConfig/delete": ("0.3", "push"),
    "agent/getAuthenticatedExtendedCard": ("0.3", "card"),
    "SendMessage": ("1.0", "send"),
    "SendStreamingMessage": ("1.0", "stream"),
    "GetTask": ("1.0", "get"),
    "CancelTask": ("1.0", "cancel"),
    "SubscribeToTask": ("1.0", "subscribe"),
    "ListTasks": ("1.0", "list"),
    "tasks/list": ("0.3", "list"),
    "CreateTaskPushNotificationConfig": ("1.0", "push"),
    "GetTaskPushNotificationConfig": ("1.0", "push"),
    "ListTaskPushNotificationConfigs": ("1.0", "push"),
    "DeleteTaskPushNotificationConfig": ("1.0", "push"),
    "GetExtendedAgentCard": ("1.0", "card"),
}

# JSON-RPC and A2A error codes (A2A specification, "Error codes").
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
PUSH_NOT_SUPPORTED = -32003
UNSUPPORTED_OPERATION = -32004
CONTENT_TYPE_NOT_SUPPORTED = -32005
EXTENDED_CARD_NOT_CONFIGURED = -32007
VERSION_NOT_SUPPORTED = -32009

# 1.0: an A2A error (not a JSON-RPC one) carries a google.rpc.ErrorInfo in its data,
# its reason the error type in UPPER_SNAKE_CASE (specification §9.5, "A2A Error
# Representation"; the a2a-sdk's A2A_ERROR_MAPPING spells them the same).
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
ERROR_DOMAIN = "a2a-protocol.org"
ERROR_REASONS = {
    TASK_NOT_FOUND: "TASK_NOT_FOUND",
    TASK_NOT_CANCELABLE: "TASK_NOT_CANCELABLE",
    PUSH_NOT_SUPPORTED: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    UNSUPPORTED_OPERATION: "UNSUPPORTED_OPERATION",
    CONTENT_TYPE_NOT_SUPPORTED: "CONTENT_TYPE_NOT_SUPPORTED",
    EXTENDED_CARD_NOT_CONFIGURED: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    VERSION_NOT_SUPPORTED: "VERSION_NOT_SUPPORTED",
}

VERSION_HEADER = "A2A-Version"
TEXT_MEDIA = ("text/", "application/json", "application/xml", "application/yaml")
MAX_INLINE_TEXT = 1024 * 1024

# Our states (a turn job's) -> A2A's, in both spellings.
STATES: dict[str, tuple[str, str]] = {
    "submitted": ("submitted", "TASK_STATE_SUBMITTED"),
    "working": ("working", "TASK_STATE_WORKING"),
    "completed": ("completed", "TASK_STATE_COMPLETED"),
    "failed": ("failed", "TASK_STATE_FAILED"),
    "canceled": ("canceled", "TASK_STATE_CANCELED"),
}
FINAL_STATES = frozenset({"completed", "failed", "canceled"})
_STATE_OF_V1 = {v1: ours for ours, (_, v1) in STATES.items()}
_STATE_OF_V03 = {v03: ours for ours, (v03, _) in STATES.items()}


class RpcError(Exception):
    """A JSON-RPC error answer: code, message and optional data."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def body(self) -> dict[str, Any]:
        """The `error` member of the answer."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def check_version_header(value: str | None) -> None:
    """RpcError -32009 unless the A2A-Version header is absent, 0.3 or 1.x."""
    if value is None or not value.strip():
        return
    text = value.strip()
    major, _, minor = text.partition(".")
    if text in ("0.3", "0.3.0") or (major == "1" and (not minor or minor.split(".")[0].isdigit())):
        return
    raise RpcError(VERSION_NOT_SUPPORTED, f"A2A version {text!r} is not supported (0.3, 1.0)")


def state_of(wire_state: str) -> str:
    """Our state word from either version's spelling ("" when unknown)."""
    return _STATE_OF_V1.get(wire_state) or _STATE_OF_V03.get(wire_state) or ""


# -- incoming messages ------------------------------------------------------------------


@dataclass(frozen=True)
class Incoming:
    """A message/send (or SendMessage) request, read."""

    text: str
    message_id: str
    context_id: str | None
    agent: str | None  # message or request metadata.agent
    wait: bool  # blocking (0.3) / not returnImmediately (1.0)
    history_length: int | None
    task_id: str | None = None  # the task the message says it continues (refused)


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RpcError(INVALID_PARAMS, f"{where} must be an object")
    return value


def _string(body: dict[str, Any], key: str, where: str, *, required: bool = False) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        if required:
            raise RpcError(INVALID_PARAMS, f"{where}.{key} is required")
        return None
    if not isinstance(value, str):
        raise RpcError(INVALID_PARAMS, f"{where}.{key} must be a string")
    return value


def _history_length(config: dict[str, Any], where: str = "configuration") -> int | None:
    value = config.get("historyLength")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RpcError(INVALID_PARAMS, f"{where}.historyLength must be a whole number")
    return value


def read_send(params: Any, version: Version) -> Incoming:
    """The message of a send or stream call; RpcError for what the spec refuses."""
    params = _object(params, "params")
    message = _object(params.get("message"), "params.message")
    message_id = _string(message, "messageId", "message", required=True)
    assert message_id is not None
    role = message.get("role")
    user_roles = ("user", "ROLE_USER") if version == "0.3" else ("ROLE_USER", "user")
    if role not in user_roles:
        raise RpcError(INVALID_PARAMS, f"message.role must be {user_roles[0]}, not {role!r}")
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise RpcError(INVALID_PARAMS, "message.parts must be a non-empty list")
    texts = [_part_text(part, index, version) for index, part in enumerate(parts)]
    text = "\n\n".join(t for t in texts if t)
    if not text.strip():
        raise RpcError(INVALID_PARAMS, "the message has no text")
    config = params.get("configuration") or {}
    config = _object(config, "params.configuration")
    if version == "0.3":
        wait = config.get("blocking", True) is not False
    else:
        wait = config.get("returnImmediately", False) is not True
    if config.get("pushNotificationConfig") or config.get("taskPushNotificationConfig"):
        raise RpcError(PUSH_NOT_SUPPORTED, "push notifications are not supported")
    agent = _agent_of(message.get("metadata")) or _agent_of(params.get("metadata"))
    return Incoming(
        text=text,
        message_id=message_id,
        context_id=_string(message, "contextId", "message"),
        agent=agent,
        wait=wait,
        history_length=_history_length(config),
        task_id=_string(message, "taskId", "message"),
    )


def _agent_of(metadata: Any) -> str | None:
    if isinstance(metadata, dict):
        agent = metadata.get("agent")
        if isinstance(agent, str) and agent.strip():
            return agent.strip()
    return None


def _part_text(part: Any, index: int, version: Version) -> str:
    """What one part adds to the turn's text: text and data as they are, a file URL
    named, an inline text file included; other inline files are refused (-32005)."""
    where = f"message.parts[{index}]"
    part = _object(part, where)
    kind = part.get("kind")
    if "text" in part or kind == "text":
        text = part.get("text")
        if not isinstance(text, str):
            raise RpcError(INVALID_PARAMS, f"{where}.text must be a string")
        return text
    if "data" in part or kind == "data":
        return json.dumps(part.get("data"), ensure_ascii=False, indent=1)
    if kind == "file" or "file" in part:
        file = _object(part.get("file"), f"{where}.file")
        name = file.get("name") or ""
        media = file.get("mimeType") or file.get("mediaType") or ""
        if isinstance(file.get("uri"), str):
            return _named_url(file["uri"], str(name), str(media))
        return _inline(file.get("bytes"), str(name), str(media), where)
    if isinstance(part.get("url"), str):
        return _named_url(part["url"], str(part.get("filename") or ""), str(part.get("mediaType")))
    if "raw" in part:
        name, media = str(part.get("filename") or ""), str(part.get("mediaType") or "")
        return _inline(part.get("raw"), name, media, where)
    raise RpcError(INVALID_PARAMS, f"{where} has none of text, data, url, raw (or file)")


def _named_url(url: str, name: str, media: str) -> str:
    label = f" {name}" if name else ""
    kind = f" ({media})" if media and media != "None" else ""
    return f"[file{label}{kind}: {url}]"


def _inline(data: Any, name: str, media: str, where: str) -> str:
    if not isinstance(data, str):
        raise RpcError(INVALID_PARAMS, f"{where}: an inline file's bytes must be base64 text")
    if not media.startswith(TEXT_MEDIA):
        raise RpcError(
            CONTENT_TYPE_NOT_SUPPORTED,
            f"{where}: inline files of type {media or 'unknown'!r} are not supported "
            "(send text, data, a text file, or a file URL)",
        )
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise RpcError(INVALID_PARAMS, f"{where}: the file's bytes are not base64") from None
    if len(raw) > MAX_INLINE_TEXT:
        raise RpcError(INVALID_PARAMS, f"{where}: an inline file may hold at most 1 MB")
    text = raw.decode("utf-8", "replace")
    return f"[file {name or 'attachment'} ({media})]\n{text}"


def read_task_id(params: Any) -> str:
    """The task id of a get, cancel or subscribe call (`id` in both versions; 1.0 also
    accepts a resource name tasks/<id>)."""
    params = _object(params, "params")
    task = params.get("id") or params.get("name")
    if not isinstance(task, str) or not task.strip():
        raise RpcError(INVALID_PARAMS, "params.id (the task id) is required")
    return task.removeprefix("tasks/")


def read_history_length(params: Any) -> int | None:
    """historyLength of a get call."""
    return _history_length(_object(params, "params"), "params")


@dataclass(frozen=True)
class ListQuery:
    """A ListTasks request, read."""

    context_id: str | None
    state: str | None  # one of STATES' keys
    after: float | None  # statusTimestampAfter, epoch seconds
    page_size: int
    offset: int
    history_length: int | None
    include_artifacts: bool


DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100


def read_list(params: Any) -> ListQuery:
    """The filters and page of a ListTasks call; -32602 for a bad value."""
    params = _object(params, "params")
    state: str | None = None
    status = params.get("status")
    if status not in (None, "", "TASK_STATE_UNSPECIFIED"):
        state = state_of(status) if isinstance(status, str) else ""
        if not state:
            raise RpcError(INVALID_PARAMS, f"status {status!r} is not a task state")
    size = params.get("pageSize", DEFAULT_PAGE_SIZE)
    if size is None:
        size = DEFAULT_PAGE_SIZE
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_PAGE_SIZE:
        raise RpcError(INVALID_PARAMS, f"pageSize must be 1 to {MAX_PAGE_SIZE}")
    token = params.get("pageToken") or ""
    if not isinstance(token, str) or (token and not token.isdigit()) or len(token) > 12:
        raise RpcError(INVALID_PARAMS, "pageToken is not one this server gave")
    after = params.get("statusTimestampAfter")
    moment: float | None = None
    if after not in (None, ""):
        if not isinstance(after, str):
            raise RpcError(INVALID_PARAMS, "statusTimestampAfter must be an RFC 3339 timestamp")
        try:
            parsed = datetime.datetime.fromisoformat(after.replace("Z", "+00:00"))
        except ValueError:
            raise RpcError(
                INVALID_PARAMS, "statusTimestampAfter must be an RFC 3339 timestamp"
            ) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=datetime.UTC)
        moment = parsed.timestamp()
    return ListQuery(
        context_id=_string(params, "contextId", "params"),
        state=state,
        after=moment,
        page_size=size,
        offset=int(token or 0),
        history_length=_history_length(params, "params"),
        include_artifacts=params.get("includeArtifacts") is True,
    )


# -- outgoing objects ---------------------------------------------------------------------


@dataclass(frozen=True)
class TaskView:
    """A task as the server tells it: one turn job, its session and its text."""

    id: str
    context_id: str
    state: str  # a key of STATES
    user_text: str
    user_message_id: str
    reply: str  # the reply so far (completed: the whole reply)
    error: str  # failed: why
    at: float

    @property
    def final(self) -> bool:
        """Whether the task is settled."""
        return self.state in FINAL_STATES


def _timestamp(at: float) -> str:
    moment = datetime.datetime.fromtimestamp(at, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def message(
    version: Version,
    role: Literal["user", "agent"],
    text: str,
    message_id: str,
    task: TaskView,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A message object in `version`."""
    if version == "0.3":
        body: dict[str, Any] = {
            "kind": "message",
            "messageId": message_id,
            "role": role,
            "parts": [{"kind": "text", "text": text}],
            "taskId": task.id,
            "contextId": task.context_id,
        }
    else:
        body = {
            "messageId": message_id,
            "role": "ROLE_USER" if role == "user" else "ROLE_AGENT",
            "parts": [{"text": text}],
            "taskId": task.id,
            "contextId": task.context_id,
        }
    if metadata:
        body["metadata"] = metadata
    return body


def status(
    version: Version, task: TaskView, text: str | None = None, **meta: Any
) -> dict[str, Any]:
    """A task status in `version`, with an agent message holding `text` when given."""
    state = STATES[task.state][0 if version == "0.3" else 1]
    body: dict[str, Any] = {"state": state, "timestamp": _timestamp(task.at)}
    if text is not None:
        body["message"] = message(
            version, "agent", text, f"{task.id}-status", task, dict(meta) or None
        )
    return body


def artifact(version: Version, task: TaskView, text: str) -> dict[str, Any]:
    """The reply as an artifact."""
    part: dict[str, Any] = {"kind": "text", "text": text} if version == "0.3" else {"text": text}
    return {"artifactId": f"{task.id}-reply", "name": "reply", "parts": [part]}


def task_object(
    version: Version,
    task: TaskView,
    history_length: int | None = None,
    *,
    artifacts: bool = True,
) -> dict[str, Any]:
    """The whole task: status, the reply artifact when completed, and the history (the
    user's message and, when done, the reply as the last message)."""
    text: str | None = None
    if task.state == "failed":
        text = task.error or "the turn failed"
    elif task.state == "canceled":
        text = "the turn was stopped"
    history = [message(version, "user", task.user_text, task.user_message_id, task)]
    body: dict[str, Any] = {
        "id": task.id,
        "contextId": task.context_id,
        "status": status(version, task, text),
    }
    if task.state == "completed":
        if artifacts:
            body["artifacts"] = [artifact(version, task, task.reply)]
        history.append(message(version, "agent", task.reply, f"{task.id}-reply", task))
    if history_length is not None:
        history = history[-history_length:] if history_length else []
    body["history"] = history
    if version == "0.3":
        body["kind"] = "task"
    return body


def send_result(version: Version, task: TaskView, history_length: int | None) -> dict[str, Any]:
    """The result of a send call: a bare task (0.3) or {"task": ...} (1.0)."""
    body = task_object(version, task, history_length)
    return body if version == "0.3" else {"task": body}


def get_result(version: Version, task: TaskView, history_length: int | None) -> dict[str, Any]:
    """The result of a get or cancel call: the task itself in both versions."""
    return task_object(version, task, history_length)


def status_event(
    version: Version, task: TaskView, text: str | None = None, **meta: Any
) -> dict[str, Any]:
    """A status update for a stream."""
    body: dict[str, Any] = {
        "taskId": task.id,
        "contextId": task.context_id,
        "status": status(version, task, text, **meta),
    }
    if version == "0.3":
        return {"kind": "status-update", **body, "final": task.final}
    return {"statusUpdate": body}


def artifact_event(version: Version, task: TaskView, text: str) -> dict[str, Any]:
    """The reply as the stream's artifact update (its only and last chunk)."""
    body: dict[str, Any] = {
        "taskId": task.id,
        "contextId": task.context_id,
        "artifact": artifact(version, task, text),
        "append": False,
        "lastChunk": True,
    }
    if version == "0.3":
        return {"kind": "artifact-update", **body}
    return {"artifactUpdate": body}


def task_event(version: Version, task: TaskView) -> dict[str, Any]:
    """The task as a stream's first event."""
    body = task_object(version, task)
    return body if version == "0.3" else {"task": body}


def list_result(
    version: Version,
    tasks: list[TaskView],
    query: ListQuery,
    total: int,
    next_offset: int | None,
) -> dict[str, Any]:
    """The result of ListTasks (tasks/list): a page of tasks, newest first."""
    return {
        "tasks": [
            task_object(version, t, query.history_length, artifacts=query.include_artifacts)
            for t in tasks
        ],
        "nextPageToken": str(next_offset) if next_offset is not None else "",
        "pageSize": len(tasks),
        "totalSize": total,
    }


def answer(request_id: Any, result: Any) -> dict[str, Any]:
    """A JSON-RPC result."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def failure(request_id: Any, error: RpcError, version: Version | None = None) -> dict[str, Any]:
    """A JSON-RPC error answer; in 1.0 an A2A error's data is its ErrorInfo."""
    body = error.body()
    reason = ERROR_REASONS.get(error.code)
    if version == "1.0" and reason is not None and error.data is None:
        body["data"] = [{"@type": ERROR_INFO_TYPE, "reason": reason, "domain": ERROR_DOMAIN}]
    return {"jsonrpc": "2.0", "id": request_id, "error": body}
