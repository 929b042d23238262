"""Real `habakkuk --serve` processes: one follows Home Assistant's bus, a second stands by,
takes over when the first is killed with SIGKILL, and its trigger's turn calls the service."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from habakkuk.engine.home import Home
from tests.fakes.home_assistant import TOKEN, FakeHomeAssistant, state
from tests.helpers import eventually
from tests.processes import StartServe, kill, stop, until_said
from tests.protocols.homeassistant.test_ha_journey import config

TAKEOVER = 90.0  # seconds: two cold-started processes and a lease renewed every 10 s


@pytest.fixture
async def ha() -> AsyncIterator[FakeHomeAssistant]:
    async with FakeHomeAssistant() as fake:
        fake.add("person.alice", "home", friendly_name="Alice")
        fake.add("light.kitchen", "on", friendly_name="Kitchen")
        fake.add("light.hall", "on", friendly_name="Hall")
        yield fake


async def test_one_serve_follows_the_bus_and_the_other_takes_over_after_a_kill(
    ha: FakeHomeAssistant, home: Home, serve_process: StartServe
) -> None:
    home.config_path.write_text(config(ha.url), encoding="utf-8")
    first = await serve_process(home.root, HOMEASSISTANT_TOKEN=TOKEN, LANG="C.UTF-8")
    await until_said(first, "Home Assistant: following 1 trigger")
    await eventually(lambda: ha.connections == 1 and ha.subscribed, what="the first followed",
                     timeout=TAKEOVER)  # fmt: skip
    second = await serve_process(home.root, HOMEASSISTANT_TOKEN=TOKEN, LANG="C.UTF-8")
    await until_said(second, "Home Assistant: following 1 trigger")
    assert ha.connections == 1  # the second stands by: one process holds the lease
    await kill(first)
    await eventually(lambda: ha.connections == 2 and ha.subscribed, what="the takeover",
                     timeout=TAKEOVER)  # fmt: skip
    old, new = ha.states["person.alice"], state("person.alice", "not_home", friendly_name="Alice")
    await ha.fire_state("person.alice", old, new, context_id="01JLEFT")
    await eventually(lambda: ha.calls, what="the lights turned off", timeout=TAKEOVER)
    assert [(c.domain, c.service) for c in ha.calls] == [("light", "turn_off")]
    assert ha.states["light.hall"]["state"] == "off"
    await stop(second)
