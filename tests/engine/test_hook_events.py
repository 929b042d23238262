"""Every hook event config.yaml accepts is fired by some code path, and no other is accepted.

The accepted names are read from the config's own type (what `hooks[].event` may be),
not from a list kept here; the surfaces are run for real: a web chat turn that calls a
tool (through POST /api/chat) and a prompt schedule's run.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest

from habakkuk.engine.config import HookConfig, parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.work.schedule_types import NewSchedule
from tests.conftest import mock_config
from tests.helpers import eventually
from tests.hook_log import HookLog
from tests.server.conftest import serve  # noqa: F401  (the fixture)

SCRIPT = """
- match: "list"
  steps:
    - tool_calls: [{name: list_dir, arguments: {path: "."}}]
    - text: "Listed."
- steps:
    - text: "Echo: {input}"
"""


def accepted_events() -> set[str]:
    """The event names `hooks[].event` accepts, as the config's schema reads them."""
    return set(get_args(get_type_hints(HookConfig)["event"]))


async def test_every_event_the_config_accepts_is_fired_by_a_surface(
    serve: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    log = HookLog(tmp_path / "hooks")
    accepted = accepted_events()
    hooks = log.config(*(log.entry(event, event) for event in sorted(accepted)))
    served = await serve(mock_config(SCRIPT, extra=hooks))
    runtime = served.runtime

    # The web chat: a message whose turn calls a tool, and its reply.
    sent = await served.post_json("/api/chat", {"conversation": "c1", "text": "list please"})

    async def delivered() -> bool:
        job = await runtime.queue.get(f"reply:{sent['turn']}")
        return job is not None and job.status == "done"

    await eventually(delivered, what="the web chat's reply")

    # A schedule's run.
    schedule = await runtime.schedules.add(
        NewSchedule(agent="main", name="digest", when="@daily", prompt="summarise"), by="owner"
    )
    job = await runtime.schedules.run_now(schedule.id)

    async def ran() -> bool:
        runs = await runtime.schedules.runs(schedule.id)
        return any(r.job == job and r.status not in ("queued", "running") for r in runs)

    await eventually(ran, what="the schedule's run")
    await runtime.hooks.drain()

    fired = {event["event"] for event in log.events()}
    assert fired == accepted, f"accepted but never fired: {sorted(accepted - fired)}"
    assert log.labels() == accepted  # each hook got its own event, none another's


def test_an_event_nothing_fires_is_a_config_error_naming_file_line_and_key(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.yaml"
    text = textwrap.dedent(
        """\
        providers:
          mock: {type: mock}
        agents:
          main: {model: mock/x}
        hooks:
          - {event: turn_end, command: 'true'}
          - {event: message_received, command: 'true'}
        """
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(text, path, Home(tmp_path))
    message = str(caught.value)
    assert message.startswith(f"{path}:7: hooks[1].event: must be one of ")
    assert "message_received" in message and "\n" not in message
    listed = re.search(r"must be one of (.*), not", message)
    assert listed is not None and set(listed.group(1).split(", ")) == accepted_events()
