"""Secrets never on disk in the clear (spec 000 "Operations": Logs; issue 34).

A secret goes through every path that logs or stores text: a failing provider call whose
error body quotes the key (the fake model server on 127.0.0.1, OpenAI's wire), a model
reply and a tool result that print it and a token of a well-known shape, an MCP server
that dies with it on stderr, and a crash traceback logged. Then every byte under the home
(databases and their WAL, habakkuk.log, blobs, everything) is searched: 0 hits, while the
redaction marks show each path was taken; and so is every file of a backup of that home
with the blobs in it (`habakkuk backup --blobs`; `.env` is left out, as a backup does
without --env).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import tarfile
from pathlib import Path

import pytest

from habakkuk.engine.home import Home
from habakkuk.engine.logfile import log_path
from habakkuk.services.backup import take_backup
from habakkuk.services.backup_layout import Options
from tests.conftest import OpenRuntime, remote_config
from tests.fakes.model_server import Fail, FakeModelServer, Reply, ToolCall
from tests.helpers import eventually

KEY = "remote-key-Qz7xW2pL9vK4mN8b"  # only known as the value of $REMOTE_KEY
MCP_TOKEN = "mcp-token-Hq3Rt6Yu1Io5Pa"  # only known as $MCP_TOKEN in .env
GITHUB = "ghp_Zx81Qp02Lm93Nb74Vc65Xz56Wq47Er38Ty"  # only known by its shape

MCP_SERVER = (
    "import os, sys; sys.stderr.write('login refused for ' + os.environ['TOKEN'] + '\\n');"
    " sys.exit(3)"
)


def hits(root: Path, secret: str) -> list[str]:
    """Every file under `root` holding `secret` (as bytes: databases and WAL too), but
    .env: the one file a secret is kept in, by the user, 0600."""
    needle = secret.encode()
    return [
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and path.name != ".env" and needle in path.read_bytes()
    ]


async def test_a_secret_through_every_path_is_never_stored(
    home: Home,
    runtime_factory: OpenRuntime,
    model_server: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("REMOTE_KEY", KEY)
    home.env_path.write_text(f"MCP_TOKEN={MCP_TOKEN}\n")
    mcp = (
        "mcp_servers:\n  broken:\n"
        f"    command: {sys.executable}\n"
        f"    args: ['-c', {MCP_SERVER!r}]\n"
        "    env: {TOKEN: MCP_TOKEN}\n"
    )
    runtime = await runtime_factory(remote_config("openai", model_server.base_url, extra=mcp))
    runtime.start_workers()
    session = await runtime.sessions.new_session("main")

    # 1. A provider refuses the call and quotes the key in its error body.
    model_server.script(Fail(400, message=f"Incorrect API key provided: {KEY}"), api="chat")
    failed = await runtime.turns.wait_turn(await runtime.turns.submit(session.id, "hello"))
    assert failed.status == "failed"

    # 2. The model says it, and a tool prints it and a GitHub token.
    model_server.script(
        Reply(
            text=f"I will check {KEY}",
            tool_calls=[ToolCall("exec", {"command": f"echo {KEY} {GITHUB} {MCP_TOKEN}"})],
        ),
        Reply(text=f"the token was {GITHUB}"),
        api="chat",
    )
    done = await runtime.turns.wait_turn(
        await runtime.turns.submit(session.id, f"print {GITHUB} please")
    )
    assert done.status == "done", done

    # 3. An MCP server dies with the secret on its stderr (logged as a warning).
    await runtime.start_mcp(wait=15)
    log_file = log_path(home.root)
    await eventually(
        lambda: log_file.is_file() and "mcp server broken" in log_file.read_text(),
        what="the MCP failure logged",
    )

    # 4. A crash's traceback, logged by our code and by asyncio's handler.
    try:
        raise RuntimeError(f"provider client crashed holding {KEY}")
    except RuntimeError:
        logging.getLogger("habakkuk.crash").exception("a turn crashed with %s", GITHUB)
    loop = asyncio.get_running_loop()
    loop.call_exception_handler(
        {"message": f"task died: {MCP_TOKEN}", "exception": ValueError(f"bad {KEY}")}
    )
    await runtime.close()

    for secret in (KEY, MCP_TOKEN, GITHUB):
        assert hits(home.root, secret) == [], secret
    logged = log_file.read_text()
    assert "stderr: login refused for [REDACTED]" in logged  # the MCP path was taken
    assert "RuntimeError: provider client crashed holding [REDACTED]" in logged
    assert hits(home.root, "Incorrect API key provided: [REDACTED]")  # the job's error
    assert hits(home.root, "the token was [REDACTED]")  # the transcript

    # 5. A backup of that home, blobs included: no file of it holds a secret either.
    archive = tmp_path / "backup.tar.gz"
    await asyncio.to_thread(take_backup, home.root, archive, Options(blobs=True))
    with tarfile.open(archive) as tar:
        members = [member for member in tar.getmembers() if member.isfile()]
        assert any(member.name.endswith(".db") for member in members)
        for member in members:
            extracted = tar.extractfile(member)
            assert extracted is not None
            data = extracted.read()
            for secret in (KEY, MCP_TOKEN, GITHUB):
                assert secret.encode() not in data, (member.name, secret)
