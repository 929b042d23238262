"""Three real `habakkuk --serve` nodes on one PostgreSQL, one killed with SIGKILL at
random several times and started again, while chat turns, a schedule, board cards and
their deliveries flow: nothing is lost, stuck or doubled.

Each node plays a machine of its own: its own home folder (agents' files, logs) and its
own host name (HABAKKUK_HOSTNAME), so "a dead process on this host" cannot shortcut a
lease: a killed node's leases and jobs pass to another only when they run out
(`workers.lease_seconds`, short here). What they share is the database (`storage.url`)
and the Telegram bot (the fake Bot API on 127.0.0.1), as three machines would.
"""

from __future__ import annotations

import json
import random
import textwrap
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.config import load_config
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from habakkuk.work.board_types import NewCard
from habakkuk.work.schedule_types import NewSchedule
from habakkuk.work.service import Schedules
from tests.channels.fake_telegram import BOT_TOKEN, FakeTelegram
from tests.helpers import eventually
from tests.processes import Process, StartServe, kill, stop, until_serving

HOSTS = ("node-a", "node-b", "node-c")
MESSAGES = 12  # chat turns, sent in batches between kills
CARDS = 4
KILLS = 3
SETTLE = 240.0  # seconds: leases of killed nodes must run out before others take over


def config(pg_url: str, tg: FakeTelegram) -> str:
    return textwrap.dedent(
        f"""
        storage: {{url: '{pg_url}'}}
        workers: {{lease_seconds: 5}}
        board: {{dispatch_seconds: 1}}
        providers:
          mock:
            type: mock
            script:
              - text: "working on it"
                tool_calls:
                  - name: exec
                    arguments: {{command: "sleep 1"}}
              - text: "reply: {{input}}"
        agents:
          main:
            model: mock/script
            mode: full
        channels:
          tg:
            type: telegram
            token_env: TG_TOKEN
            base_url: {tg.base_url}
            allow_from: ["42"]
            poll_timeout: 1
        """
    )


@dataclass(frozen=True)
class Copies:
    """What the database says of one text sent to the chat."""

    recorded: int  # delivery chunks recorded as sent with it
    explained: int  # extra copies of them a killed node's unrecorded send explains


def rows(pg_url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of the shared database, read as any other client would."""
    import psycopg

    with psycopg.connect(pg_url, connect_timeout=5) as conn:
        return list(conn.execute(sql, params).fetchall())


def assistant_replies(pg_url: str) -> Counter[str]:
    """Each final `reply: ...` text committed to a transcript, with how many times."""
    found: Counter[str] = Counter()
    for (blocks,) in rows(
        pg_url, "SELECT blocks FROM transcripts.messages WHERE role = 'assistant'"
    ):
        for block in json.loads(blocks):
            text = str(block.get("text", ""))
            if block.get("type") == "text" and text.startswith("reply: "):
                found[text] += 1
    return found


def copies_explained(pg_url: str, tg: FakeTelegram, text: str, killed: set[int]) -> Copies:
    """The chunks recorded with `text` and the extra copies of them a kill explains.

    A Telegram message carries no idempotency key and the Bot API has no history to look
    in, so a node killed after Telegram took a chunk and before the chunk's record leaves
    a chunk the node resuming the delivery sends again (channels/deliveries.py): the one
    double the design allows. The chunk then has started sends (delivery_attempts, each by
    its lease owner `host:pid:token`) by the killed process and by the one that resent it.
    So each extra copy needs a killed owner among two or more; any other double is a bug.
    """
    ids = [str(mid) for (_, mid), message in tg.messages.items() if message["text"] == text]
    recorded = rows(
        pg_url,
        "SELECT delivery, idx FROM control.delivery_chunks WHERE message_id = ANY(%s)",
        (ids,),
    )
    extra = 0
    for delivery, idx in recorded:
        owners = [
            str(owner)
            for (owner,) in rows(
                pg_url,
                "SELECT owner FROM control.delivery_attempts WHERE delivery = %s AND idx = %s",
                (delivery, idx),
            )
        ]
        by_killed = [owner for owner in owners if int(owner.split(":")[1]) in killed]
        extra += len(by_killed) if len(owners) >= 2 else 0
    return Copies(len(recorded), extra)


def unsettled(pg_url: str) -> list[tuple[Any, ...]]:
    """Jobs neither done nor waiting for a later time: queued now, running or failed."""
    return rows(
        pg_url,
        "SELECT id, kind, status FROM control.jobs"
        " WHERE status IN ('running', 'failed') OR (status = 'queued' AND run_after <= %s)",
        (time.time(),),
    )


@pytest.mark.timeout(600)
async def test_three_nodes_lose_and_double_nothing_when_one_is_killed_again_and_again(
    tmp_path: Path, pg_url: str, tg: FakeTelegram, serve_process: StartServe
) -> None:
    text = config(pg_url, tg)
    homes = {}
    for host in HOSTS:
        root = tmp_path / host
        root.mkdir()
        (root / "config.yaml").write_text(text)
        homes[host] = root
    first_home = Home(homes[HOSTS[0]])
    async with await Runtime.open(first_home, load_config(first_home)) as runtime:
        # Created on a whole second, a period ago: its first slot is due at once.
        schedules = Schedules(
            runtime.queue.db,
            runtime.queue,
            runtime.config,
            clock=lambda: float(int(time.time())) - 15,
        )
        schedule = await schedules.add(
            NewSchedule(
                agent="main", name="tick", when="@every 15s", prompt="tick", deliver_to="tg:42"
            ),
            by="owner",
        )
        cards = [
            (await runtime.board.create(NewCard(f"card-{i}", assignee="main"), by="user")).id
            for i in range(CARDS)
        ]

    rng = random.Random(29)
    nodes: dict[str, Process] = {}
    killed: list[int] = []

    async def start(host: str) -> None:
        nodes[host] = await serve_process(homes[host], TG_TOKEN=BOT_TOKEN, HABAKKUK_HOSTNAME=host)
        await until_serving(nodes[host])

    for host in HOSTS:
        await start(host)
    sent = 0
    batch = MESSAGES // (KILLS + 1)
    for _ in range(KILLS):
        for _ in range(batch):
            tg.message(f"msg-{sent}")
            sent += 1
        # Work in flight somewhere: a turn running, then one node dies mid-stride.
        await eventually(
            lambda: rows(pg_url, "SELECT 1 FROM control.jobs WHERE status = 'running'"),
            what="a job running on some node",
            timeout=120,
        )
        victim = rng.choice(HOSTS)
        killed.append(nodes[victim].pid)
        await kill(nodes[victim])
        await start(victim)
    while sent < MESSAGES:
        tg.message(f"msg-{sent}")
        sent += 1

    wanted = {f"reply: msg-{i}" for i in range(MESSAGES)}
    await eventually(
        lambda: wanted <= set(tg.texts()), what="a reply to every message", timeout=SETTLE
    )
    # A card's turn that ends without marking it done leaves it blocked (the mock agent
    # never calls the board's tools): either way its attempt is over.
    await eventually(
        lambda: all(
            status in ("done", "blocked")
            for (status,) in rows(pg_url, "SELECT status FROM control.board_cards")
        ),
        what="every card's attempt over",
        timeout=SETTLE,
    )
    await eventually(
        lambda: len(rows(pg_url, "SELECT 1 FROM control.schedule_runs WHERE status = 'ran'")) >= 2,
        what="two slots of the schedule to run",
        timeout=SETTLE,
    )
    await eventually(lambda: not unsettled(pg_url), what="every job settled", timeout=SETTLE)
    stopped = {process.pid for process in nodes.values()}
    for process in nodes.values():
        await stop(process)  # cleanly: exit 0, no traceback
    # Each node stopped cleanly left; a killed one's row stays (shown stale) until pruned
    # (one killed before its first heartbeat never had a row).
    left = {int(pid) for (pid,) in rows(pg_url, "SELECT pid FROM control.nodes")}
    assert left <= set(killed) and left.isdisjoint(stopped)

    # 0 lost or stuck: every job done (or waiting for its time), every card dispatched
    # once, its job done.
    assert unsettled(pg_url) == []
    attempts = rows(pg_url, "SELECT id, attempt FROM control.board_cards ORDER BY id")
    assert attempts == sorted((card, 1) for card in cards)
    # 0 doubled: each chat message answered once in its transcript and once in the chat,
    # but for a copy a kill explains (killed_resends: Telegram has no key to drop a resend
    # by): such a copy is counted, never an unexplained one.
    sent_texts = Counter(t for t in tg.texts() if t.startswith("reply: msg-"))
    assert set(sent_texts) == wanted
    for text, copies in sent_texts.items():
        found = copies_explained(pg_url, tg, text, set(killed))
        assert found.recorded == 1 and copies <= 1 + found.explained, (text, copies, found)
    committed = assistant_replies(pg_url)
    assert {t: committed[t] for t in wanted} == dict.fromkeys(wanted, 1)
    # Each card's turn committed one final reply.
    for i in range(CARDS):
        assert sum(n for t, n in committed.items() if f"card-{i}" in t) == 1, f"card-{i}"
    # Each slot of the schedule ran once and was delivered once.
    ran = rows(
        pg_url,
        "SELECT slot FROM control.schedule_runs WHERE schedule = %s AND status = 'ran'",
        (schedule.id,),
    )
    assert len(ran) == len({slot for (slot,) in ran})
    assert committed["reply: tick"] == len(ran)
    ticks = Counter(tg.texts())["reply: tick"]
    found = copies_explained(pg_url, tg, "reply: tick", set(killed))
    assert found.recorded == len(ran) and len(ran) <= ticks <= len(ran) + found.explained
