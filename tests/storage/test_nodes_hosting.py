"""`--agents`: two nodes, each hosting one agent, share one queue; every turn runs on the
node that hosts its agent (on PostgreSQL each node has its own home folder, as separate
machines; on SQLite they share the home, as two processes of one machine)."""

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

TURNS = 4


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
          ops: {model: mock/script, mode: full}
        """
    )


def ran(homes: list[Path], agent: str) -> Counter[str]:
    """The hosts that ran `agent`'s turns (each turn one line), in any home's folder."""
    hosts: Counter[str] = Counter()
    for home in dict.fromkeys(homes):
        path = home / "agents" / agent / "workspace" / "ran.txt"
        if path.exists():
            hosts.update(path.read_text().split())
    return hosts


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.timeout(300)
async def test_each_turn_runs_on_the_node_that_hosts_its_agent(
    tmp_path: Path, serve_process: StartServe, request: pytest.FixtureRequest, backend: str
) -> None:
    storage = ""
    if backend == "postgres":
        storage = f"storage: {{url: '{request.getfixturevalue('pg_url')}'}}\n"
    homes: dict[str, Path] = {}
    for name in ("alpha", "beta", "client"):
        root = tmp_path / (name if backend == "postgres" else "home")
        root.mkdir(exist_ok=True)
        (root / "config.yaml").write_text(config(storage))
        homes[name] = root
    alpha = await serve_process(
        homes["alpha"], flags=("--agents", "main"), HABAKKUK_HOSTNAME="alpha"
    )
    beta = await serve_process(homes["beta"], flags=("--agents", "ops"), HABAKKUK_HOSTNAME="beta")
    await until_serving(alpha)
    await until_serving(beta)
    client = Home(homes["client"])
    every = list(homes.values())
    async with await Runtime.open(client, load_config(client)) as runtime:
        for agent in ("main", "ops") * TURNS:
            session = await runtime.sessions.new_session(agent)
            await runtime.turns.submit(session.id, "where are you?")
        await eventually(
            lambda: sum(ran(every, "main").values()) + sum(ran(every, "ops").values()) == 2 * TURNS,
            what="every turn to run",
            timeout=PROCESS_BOUND,
        )
        nodes = {node.host: node.agents for node in await runtime.nodes.nodes()}
    await stop(alpha)
    await stop(beta)
    assert nodes == {"alpha": ("main",), "beta": ("ops",)}
    assert ran(every, "main") == Counter({"alpha": TURNS})
    assert ran(every, "ops") == Counter({"beta": TURNS})
    if backend == "postgres":  # in the hosting machine's folder of the agent, no other
        assert ran([homes["beta"], homes["client"]], "main") == Counter()
        assert ran([homes["alpha"], homes["client"]], "ops") == Counter()
