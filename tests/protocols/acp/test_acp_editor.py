"""`habakkuk acp` driven by the `agent-client-protocol` package's client over a real
stdio pipe, as an editor drives it: initialize, sessions in the editor's folder, streamed
turns, permissions answered each way, files through the editor's buffers, the plan,
cancel mid-turn, load replay, and bad requests answered with JSON-RPC errors."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.schema import ClientCapabilities, FileSystemCapabilities

from habakkuk.engine.home import Home
from tests.conftest import mock_config
from tests.processes import query
from tests.protocols.acp.editor import BOUND, REPO, EditorClient, agent_env, habakkuk_acp, until

SCRIPT = """
- match: "^think"
  steps:
    - thinking: "pondering"
      text: "answer: {input}"
- match: "^run"
  steps:
    - tool_calls: [{name: exec, arguments: {command: "echo ran-it"}}]
    - text: "ran"
- match: "^files"
  steps:
    - tool_calls: [{name: read_file, arguments: {path: "notes.txt"}}]
    - tool_calls: [{name: write_file, arguments: {path: "out.txt", content: "fresh words"}}]
    - tool_calls:
        - name: edit_file
          arguments: {path: "notes.txt", old_string: "draft", new_string: "final"}
    - tool_calls:
        - name: update_plan
          arguments:
            entries:
              - {content: "read the notes", status: completed, priority: high}
              - {content: "write it up", status: in_progress}
    - text: "files done"
- match: "^fail"
  steps:
    - error: bad_request
- match: "^slow"
  steps:
    - tool_calls: [{name: exec, arguments: {command: "sleep 45"}}]
    - text: "slept"
- steps:
    - text: "answer: {input}"
"""

FS = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True))


@pytest.fixture
def project(home: Home, tmp_path: Path) -> Path:
    """The editor's folder, and the home's config (one agent, workspace mode)."""
    home.config_path.write_text(mock_config(SCRIPT, mode="workspace"), encoding="utf-8")
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def statuses(client: EditorClient) -> list[tuple[str, str]]:
    """(tool call id, status) of each tool call update, in order."""
    return [(u.tool_call_id, str(u.status)) for u in client.of_kind("tool_call_update")]


def clean(stderr: Path) -> None:
    text = stderr.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in text, text


async def test_a_turn_streams_in_the_editors_folder_and_loads_again(
    home: Home, project: Path, tmp_path: Path
) -> None:
    client = EditorClient()
    errors = tmp_path / "acp.err"

    async def first() -> str:
        async with habakkuk_acp(client, home.root, errors) as (conn, _):
            hello = await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=FS)
            assert hello.protocol_version == PROTOCOL_VERSION
            assert hello.agent_capabilities is not None
            assert hello.agent_capabilities.load_session is True
            assert hello.agent_info is not None and hello.agent_info.name == "habakkuk"
            session = (await conn.new_session(cwd=str(project))).session_id
            reply = await conn.prompt(session_id=session, prompt=[text_block("think it over")])
            assert reply.stop_reason == "end_turn"
            return session

    session = await asyncio.wait_for(first(), BOUND)
    assert client.runs() == ["agent_thought_chunk", "agent_message_chunk"]
    assert client.text("agent_thought_chunk") == "pondering"
    assert client.text() == "answer: think it over"
    clean(errors)
    row = query(home.root / "transcripts.db", "SELECT * FROM sessions WHERE id = ?", (session,))
    assert row[0]["origin"] == f"acp:{project}"
    assert f"workspace folder {project}" in row[0]["system_prompt"]  # the frozen prompt
    turns = query(home.root / "control.db", "SELECT kind, status FROM jobs")
    assert [(r["kind"], r["status"]) for r in turns] == [("acp_turn", "done")]

    # Another editor process opens the session again: its messages come back as updates.
    again = EditorClient()

    async def second() -> None:
        async with habakkuk_acp(again, home.root, tmp_path / "load.err") as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            await conn.load_session(cwd=str(project), session_id=session)
            assert again.runs() == [
                "user_message_chunk",
                "agent_thought_chunk",
                "agent_message_chunk",
            ]
            assert again.text("user_message_chunk") == "think it over"
            assert again.text() == "answer: think it over"
            reply = await conn.prompt(session_id=session, prompt=[text_block("and more")])
            assert reply.stop_reason == "end_turn"
            assert again.text().endswith("answer: and more")

    await asyncio.wait_for(second(), BOUND)


async def test_permission_requests_are_answered_each_way(
    home: Home, project: Path, tmp_path: Path
) -> None:
    client = EditorClient(answers=["allow_once", "deny", "allow_session"])
    errors = tmp_path / "acp.err"

    async def scenario() -> None:
        async with habakkuk_acp(client, home.root, errors) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = (await conn.new_session(cwd=str(project))).session_id
            for _ in range(4):
                reply = await conn.prompt(session_id=session, prompt=[text_block("run it")])
                assert reply.stop_reason == "end_turn"

    await asyncio.wait_for(scenario(), BOUND)
    clean(errors)
    # Asked three times: the fourth call rides on the grant "for the session".
    assert len(client.asked) == 3
    call, options = client.asked[0]
    assert [(o.option_id, o.kind) for o in options] == [
        ("allow_once", "allow_once"),
        ("allow_session", "allow_always"),
        ("deny", "reject_once"),
    ]
    assert call.kind == "execute" and call.title == "echo ran-it"
    started = client.of_kind("tool_call")
    assert [(s.kind, s.title) for s in started] == [("execute", "echo ran-it")] * 4
    ended = [status for _, status in statuses(client)]
    assert ended == ["completed", "failed", "completed", "completed"]
    outputs = [u.raw_output for u in client.of_kind("tool_call_update")]
    assert "ran-it" in outputs[0] and "denied by editor" in outputs[1]
    assert "ran-it" in outputs[2] and "ran-it" in outputs[3]


async def test_file_tools_use_the_editors_buffers_and_the_plan_is_shown(
    home: Home, project: Path, tmp_path: Path
) -> None:
    notes = str(project / "notes.txt")
    client = EditorClient(buffers={notes: "an unsaved draft\n"})
    errors = tmp_path / "acp.err"

    async def scenario() -> None:
        async with habakkuk_acp(client, home.root, errors) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=FS)
            session = (await conn.new_session(cwd=str(project))).session_id
            reply = await conn.prompt(session_id=session, prompt=[text_block("files please")])
            assert reply.stop_reason == "end_turn"

    await asyncio.wait_for(scenario(), BOUND)
    clean(errors)
    started = client.of_kind("tool_call")
    assert [(s.kind, s.title) for s in started] == [
        ("read", "notes.txt"),
        ("edit", "out.txt"),
        ("edit", "notes.txt"),
        ("think", "plan"),
    ]
    assert [loc.path for loc in started[0].locations] == [notes]
    assert [loc.path for loc in started[1].locations] == [str(project / "out.txt")]
    ended = client.of_kind("tool_call_update")
    assert [str(u.status) for u in ended] == ["completed"] * 4
    assert "an unsaved draft" in ended[0].raw_output  # read from the buffer, not the disk
    # Written through the editor: nothing on disk, the buffers hold the words.
    assert client.written == {
        str(project / "out.txt"): "fresh words",
        notes: "an unsaved final\n",
    }
    assert sorted(p.name for p in project.iterdir()) == []
    diff = [c for c in ended[2].content if c.type == "diff"]
    assert [(d.path, d.old_text, d.new_text) for d in diff] == [(notes, "draft", "final")]
    plans = client.of_kind("plan")
    assert [[(e.content, e.status, e.priority) for e in p.entries] for p in plans] == [
        [("read the notes", "completed", "high"), ("write it up", "in_progress", "medium")]
    ]
    # The plan shows when its call succeeds, before the call's own update.
    assert client.runs()[-4:-1] == ["tool_call", "plan", "tool_call_update"]
    assert client.text() == "files done"


async def test_cancel_stops_the_running_turn_at_once(
    home: Home, project: Path, tmp_path: Path
) -> None:
    client = EditorClient(answers=["allow_once"])
    errors = tmp_path / "acp.err"

    async def scenario() -> str:
        async with habakkuk_acp(client, home.root, errors) as (conn, process):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = (await conn.new_session(cwd=str(project))).session_id
            prompt = asyncio.create_task(
                conn.prompt(session_id=session, prompt=[text_block("slow one")])
            )
            await until(client, lambda: client.asked, "the permission request")
            await conn.cancel(session_id=session)
            reply = await asyncio.wait_for(prompt, 20)  # well before the 45 s sleep ends
            assert reply.stop_reason == "cancelled"
            # The process serves on: the next prompt in the session runs.
            after = await conn.prompt(session_id=session, prompt=[text_block("still there?")])
            assert after.stop_reason == "end_turn"
            assert process.returncode is None
            return session

    session = await asyncio.wait_for(scenario(), BOUND)
    clean(errors)
    assert client.text().endswith("answer: still there?")
    jobs = query(
        home.root / "control.db",
        "SELECT status FROM jobs WHERE kind = 'acp_turn' ORDER BY created_at",
    )
    assert [r["status"] for r in jobs] == ["cancelled", "done"]
    assert session


async def test_bad_requests_get_json_rpc_errors_and_the_process_serves_on(
    home: Home, project: Path, tmp_path: Path
) -> None:
    client = EditorClient()

    async def through_the_client() -> None:
        async with habakkuk_acp(client, home.root, tmp_path / "acp.err") as (conn, process):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            with pytest.raises(RequestError) as unknown:
                await conn.prompt(session_id="ses_nobody", prompt=[text_block("hi")])
            assert unknown.value.code == -32602
            assert "ses_nobody" in json.dumps(unknown.value.data)
            with pytest.raises(RequestError) as relative:
                await conn.new_session(cwd="not/absolute")
            assert relative.value.code == -32602
            with pytest.raises(RequestError) as missing:
                await conn.load_session(cwd=str(project), session_id="ses_nobody")
            assert missing.value.code == -32602
            session = (await conn.new_session(cwd=str(project))).session_id
            # A turn that fails for good answers its prompt with the error.
            with pytest.raises(RequestError) as failed:
                await conn.prompt(session_id=session, prompt=[text_block("fail now")])
            assert failed.value.code == -32603
            assert "bad_request" in json.dumps(failed.value.data)
            reply = await conn.prompt(session_id=session, prompt=[text_block("fine")])
            assert reply.stop_reason == "end_turn"
            assert process.returncode is None

    await asyncio.wait_for(through_the_client(), BOUND)
    assert client.text() == "answer: fine"

    # Raw lines an editor with a bug might send: each gets its error, and the next works.
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "habakkuk.cli",
        "acp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=agent_env(home.root),
        cwd=REPO,
    )
    assert process.stdin is not None and process.stdout is not None
    replies: dict[int, Any] = {}

    async def call(number: int, method: str, params: Any) -> Any:
        line = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(line).encode() + b"\n")
        await process.stdin.drain()
        while number not in replies:
            said = json.loads(await process.stdout.readline())
            replies[said.get("id")] = said
        return replies[number]

    async def raw() -> None:
        hello = await call(1, "initialize", {"protocolVersion": PROTOCOL_VERSION})
        assert hello["result"]["agentCapabilities"]["loadSession"] is True
        no_id = await call(2, "session/prompt", {"prompt": [{"type": "text", "text": "x"}]})
        assert no_id["error"]["code"] == -32602  # sessionId missing
        typo = await call(3, "session/new", {"cwd": 42})
        assert typo["error"]["code"] == -32602
        unknown = await call(4, "session/nothing", {})
        assert unknown["error"]["code"] == -32601
        made = await call(5, "session/new", {"cwd": str(project), "mcpServers": []})
        assert made["result"]["sessionId"].startswith("ses")
        process.stdin.close()  # type: ignore[union-attr]  # asserted above
        assert await process.wait() == 0

    try:
        await asyncio.wait_for(raw(), BOUND)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_output_that_is_not_a_pipe_is_one_line_not_a_traceback(
    home: Home, project: Path, tmp_path: Path
) -> None:
    with (tmp_path / "out").open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "habakkuk.cli",
            "acp",
            stdin=asyncio.subprocess.PIPE,
            stdout=out,
            stderr=asyncio.subprocess.PIPE,
            env=agent_env(home.root),
            cwd=REPO,
        )
        _, err = await asyncio.wait_for(process.communicate(b""), BOUND)
    said = err.decode()
    assert process.returncode != 0
    assert "must be pipes" in said and "Traceback" not in said, said
    assert (tmp_path / "out").read_bytes() == b""
