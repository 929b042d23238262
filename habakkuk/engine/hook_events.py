"""The catalogue of hook events (spec 000 "Hooks"): the one list of what the code fires.

`HookEvent` is both the type every firing site passes (so mypy rejects a name that is
not here) and the set of names `hooks[].event` accepts in config.yaml and a plugin's
manifest (engine/config.py reads it), so a hook can never be configured for an event
nothing fires. tests/engine/test_hook_events.py runs every surface and checks that each
name here is fired by some code path.

Each event's subject, the text a hook's `match` is searched in:

| event        | fired by                                  | subject             |
|--------------|-------------------------------------------|---------------------|
| turn_start   | the turn loop, every run of a turn        | the agent           |
| turn_end     | the turn loop                             | the agent           |
| tool_before  | the tool registry, before a call (waits)  | the tool            |
| tool_after   | the tool registry, after a call           | the tool            |
| message_in   | the gateway, a message it accepted        | the channel account |
| message_out  | the delivery worker, a delivery sent      | the channel account |
| session_new  | the sessions service, a session created   | the agent           |
| schedule_run | the schedule runners, each run of a slot  | the schedule's name |

Kept free of heavy imports: config.py imports it, and `habakkuk --help` stays instant.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, get_args

HookEvent = Literal[
    "turn_start",
    "turn_end",
    "tool_before",
    "tool_after",
    "message_in",
    "message_out",
    "session_new",
    "schedule_run",
]
HOOK_EVENTS: tuple[HookEvent, ...] = get_args(HookEvent)
# Only these are waited for (and fail closed); the others run in the background.
BLOCKING_EVENTS: frozenset[HookEvent] = frozenset({"tool_before"})


class HookFirer(Protocol):
    """What a firing site needs of the hooks (habakkuk.engine.hooks.Hooks)."""

    def fire(self, event: HookEvent, subject: str, data: dict[str, Any]) -> None:
        """Start the hooks of `event` whose match finds `subject`, in the background."""
        ...
