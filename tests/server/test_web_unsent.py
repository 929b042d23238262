"""A file sent to a web conversation (/export, the send_file tool) that the web chat cannot
receive is a line in that conversation saying so, and the overview counts it: through
the real HTTP routes (POST /api/chat, the event stream, GET /api/overview)."""

from __future__ import annotations

from typing import Any

from tests.conftest import mock_config
from tests.helpers import eventually
from tests.server.conftest import SSEReader

NOTICE = "Could not send the file {name} here: web chats cannot receive files."

SEND_FILE = """
- match: "report"
  steps:
    - text: "Sending it."
      tool_calls: [{name: send_file, arguments: {path: "report.txt", caption: "numbers"}}]
    - text: "Sent."
- steps:
    - text: "Echo: {input}"
"""


async def notices(served: Any, conversation: str, count: int) -> list[str]:
    """The first `count` notices of the conversation, read from its event stream."""
    async with served.client.get(
        f"{served.url}/api/chat/{conversation}/events", headers=served.auth()
    ) as response:
        reader = SSEReader(response)
        frames = [
            await reader.until(
                lambda f: f.get("event") == "message" and f["data"]["role"] == "notice"
            )
            for _ in range(count)
        ]
    return [f["data"]["text"] for f in frames]


async def unsent(served: Any) -> int:
    count: int = (await served.get_json("/api/overview"))["unsent"]
    return count


async def test_export_in_the_web_chat_says_the_file_could_not_be_sent(serve: Any) -> None:
    served = await serve(mock_config(SEND_FILE))
    first = await served.post_json("/api/chat", {"conversation": "x1", "text": "hello"})
    await served.runtime.turns.wait_turn(first["turn"])
    assert await unsent(served) == 0
    await served.post_json("/api/chat", {"conversation": "x1", "text": "/export"}, status=202)
    session = first["session"]
    assert await notices(served, "x1", 1) == [NOTICE.format(name=f"{session}.md")]
    await eventually(lambda: unsent(served), what="the overview to count the unsent file")
    overview = await served.get_json("/api/overview")
    assert overview["unsent"] == 1
    [error] = [e for e in overview["errors"] if e["kind"] == "delivery:web"]
    assert error["error"].startswith(f"not sent: the file {session}.md: web chats cannot")


async def test_the_send_file_tool_in_the_web_chat_says_the_file_could_not_be_sent(
    serve: Any,
) -> None:
    # send_file is offered where channels are configured: here the web chat's own account.
    served = await serve(mock_config(SEND_FILE, extra="channels:\n  web:\n    type: web\n"))
    workspace = served.runtime.home.default_workspace("main")
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "report.txt").write_text("1, 2, 3\n")
    sent = await served.post_json("/api/chat", {"conversation": "x2", "text": "the report"})
    outcome = await served.runtime.turns.wait_turn(sent["turn"])
    assert outcome.status == "done"
    assert await notices(served, "x2", 1) == [NOTICE.format(name="report.txt")]
    await eventually(lambda: unsent(served), what="the overview to count the unsent file")
