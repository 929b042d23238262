"""`habakkuk status`: the parts of readiness in the terminal, from the running server's
/readyz or from the databases; exit 0 ready, 1 not ready, 2 nothing running."""

from __future__ import annotations

import asyncio
import json
import re
import textwrap

import pytest

from habakkuk import __version__
from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.channels.fake_telegram import FakeTelegram
from tests.conftest import WriteConfig, mock_config
from tests.helpers import eventually
from tests.processes import StartServe, free_port, stop, until_http, until_serving


async def status(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    """Run `habakkuk status` (in a thread: it runs its own event loop); its exit code and
    output lines."""
    code = await asyncio.to_thread(main, ["status", *args])
    return code, capsys.readouterr().out.splitlines()


def readiness(lines: list[str]) -> list[str]:
    """The lines from "ready" or "not ready" on (the summary comes before them)."""
    starts = [i for i, line in enumerate(lines) if line.startswith(("ready (", "not ready ("))]
    assert starts, lines
    return lines[starts[0] :]


def test_nothing_running_is_exit_2_with_one_line(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(mock_config())
    assert main(["status"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.strip().splitlines()
    assert line == f"nothing serves {home.root}: start it with `habakkuk serve`"


@pytest.mark.timeout(180)
async def test_status_reads_the_servers_readyz_and_names_a_channel_that_is_down(
    home: Home,
    write_config: WriteConfig,
    serve_process: StartServe,
    tg: FakeTelegram,
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_port()
    channel = f"""
        channels:
          tg:
            type: telegram
            token_env: TG_TOKEN
            base_url: {tg.base_url}
            poll_timeout: 1
        http:
          listen: 127.0.0.1:{port}
        """
    write_config(mock_config(extra=textwrap.dedent(channel)))
    server = await serve_process(home.root)
    await until_http(server)

    async def ready() -> bool:
        return (await status(capsys))[0] == 0

    await eventually(ready, what="status to say ready once the channel connects", timeout=60)
    code, lines = await status(capsys)
    lines = readiness(lines)
    assert code == 0
    assert lines[0] == f"ready (from the server at http://127.0.0.1:{port})"
    assert re.fullmatch(r"queue: \d+ waiting, \d+ running", lines[-1]), lines
    kinds = {line.split()[0] for line in lines[1:-1]}
    assert kinds == {"store", "listener", "channel", "pool"}
    [tg_line] = [line for line in lines if line.startswith("channel")]
    assert tg_line.split()[1:4] == ["tg", "ok", "connected"] and "since" in tg_line

    await tg.stop()  # Telegram refuses connections now

    async def down() -> bool:
        return (await status(capsys))[0] == 1

    await eventually(down, what="status to say not ready while Telegram refuses", timeout=60)
    code, lines = await status(capsys, "--json")
    body = json.loads("\n".join(lines))
    [tg_part] = [part for part in body["parts"] if part["kind"] == "channel"]
    assert code == 1 and body["ready"] is False
    assert tg_part["ok"] is False and tg_part["reason"]
    code, lines = await status(capsys)
    lines = readiness(lines)
    assert lines[0].startswith("not ready (from the server at")
    [tg_line] = [line for line in lines if line.startswith("channel")]
    assert tg_line.split()[1:3] == ["tg", "FAIL"], tg_line
    assert ": " in tg_line  # and why
    await stop(server)


@pytest.mark.timeout(120)
async def test_without_http_status_reads_the_databases_and_says_so(
    home: Home,
    write_config: WriteConfig,
    serve_process: StartServe,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_config(mock_config())
    server = await serve_process(home.root)
    await until_serving(server)

    async def seen() -> bool:
        return (await status(capsys))[0] != 2  # its node row is written as it starts

    await eventually(seen, what="status to see the serving process")
    code, everything = await status(capsys)
    lines = readiness(everything)
    summary = everything[: len(everything) - len(lines)]
    assert code == 0
    assert summary[0] == f"Habakkuk {__version__}"
    assert re.fullmatch(
        rf"serving: pid {server.pid} on \S+ \(version {re.escape(__version__)}\), up \d+[smhd]",
        summary[1],
    ), summary
    assert summary[2:] == ["today: 0 tokens, $0.00", "no errors in the past day"]
    assert lines[0].startswith("ready (from the databases: no process serves HTTP")
    assert [line.split()[:3] for line in lines[1:-1]] == [
        ["store", "control.db", "ok"],
        ["store", "transcripts.db", "ok"],
    ]
    assert re.fullmatch(r"queue: \d+ waiting, \d+ running", lines[-1]), lines
    await stop(server)
