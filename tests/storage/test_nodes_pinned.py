"""The terminal's turns run in the terminal, even with a `--serve` on the same queue.

The terminal's chat streams its turn and answers its approvals in its own process, so a
turn it submits (`here=True`) is pinned to that process: another node sharing the queue
(a `--serve` in tmux on one SQLite home, or on another machine with PostgreSQL) never
claims it while the terminal lives. Before the pin, the server's node took it at once
and the terminal showed "1 queued" forever.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path

import pytest

from habakkuk.engine.config import load_config
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.helpers import PROCESS_BOUND, eventually
from tests.processes import StartServe, stop, until_serving

PINNED_TURNS = 3


def config(storage: str) -> str:
    return storage + textwrap.dedent(
        """
        providers:
          mock:
            type: mock
            script:
              - text: "noting where I run"
                tool_calls:
                  - name: exec
                    arguments: {command: "echo $HABAKKUK_HOSTNAME >> ran.txt"}
              - text: "done"
        agents:
          main: {model: mock/script, mode: full}
        """
    )


def ran(homes: list[Path]) -> Counter[str]:
    """The hosts that ran turns (one line each), in any home's folder."""
    hosts: Counter[str] = Counter()
    for home in dict.fromkeys(homes):
        path = home / "agents" / "main" / "workspace" / "ran.txt"
        if path.exists():
            hosts.update(path.read_text().split())
    return hosts


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.timeout(300)
async def test_the_terminals_turns_run_in_the_terminal_beside_a_server(
    tmp_path: Path,
    serve_process: StartServe,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    storage = ""
    if backend == "postgres":
        storage = f"storage: {{url: '{request.getfixturevalue('pg_url')}'}}\n"
    homes: dict[str, Path] = {}
    for name in ("server", "terminal"):
        root = tmp_path / (name if backend == "postgres" else "home")
        root.mkdir(exist_ok=True)
        (root / "config.yaml").write_text(config(storage))
        homes[name] = root
    every = list(homes.values())
    server = await serve_process(homes["server"], HABAKKUK_HOSTNAME="server")
    await until_serving(server)
    monkeypatch.setenv("HABAKKUK_HOSTNAME", "terminal")
    home = Home(homes["terminal"])
    async with await Runtime.open(home, load_config(home)) as terminal:
        for _ in range(PINNED_TURNS):
            session = await terminal.sessions.new_session("main")
            await terminal.turns.submit(session.id, "where are you?", attended=True, here=True)
        # A turn anyone may run, queued after the pinned ones: once the server has run
        # it, it has looked at the older pinned turns and passed them by.
        other = await terminal.sessions.new_session("main")
        sentinel = await terminal.turns.submit(other.id, "and you?")
        outcome = await terminal.turns.wait_turn(sentinel)
        assert outcome.status == "done"
        assert ran(every) == Counter({"server": 1})
        terminal.start_workers(channels=False)
        await eventually(
            lambda: sum(ran(every).values()) == PINNED_TURNS + 1,
            what="the pinned turns to run",
            timeout=PROCESS_BOUND,
        )
    await stop(server)
    assert ran(every) == Counter({"server": 1, "terminal": PINNED_TURNS})
