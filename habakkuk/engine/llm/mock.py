"""The `mock` provider: replays a script of replies, so everything runs offline.

A script is a list of steps (replies) that every turn walks through: step N is
the reply to the Nth model call of the turn (the count of assistant messages
since the last message the user typed). So a resumed turn picks up at the right
step, and many sessions can share one script. A script may instead be a list
of scenarios `{match: REGEX, steps: [...]}`; the first whose regex matches the
user's text is used (a scenario without `match` matches anything).

A step is `{text, thinking, tool_calls: [{name, arguments}], error, after}`;
`{input}` in text stands for the user's message. `after` maps what happened to the
previous step's tool calls (ok, error, denied, interrupted, not_run: see
toolkit/outcome.py) to the text to say instead, so a reply never claims a call ran
when it was denied or stopped. Past the last step the turn gets a
plain "done." so a script can never loop forever. With no script the provider
echoes the user in an offline-demo voice, except for the model `tour`, which
plays the offline demo's guided tour (demo_tour.py) at a visible streaming pace.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..toolkit.outcome import OUTCOMES, Outcome, stored_outcome
from .provider import ERROR_CLASSES, ErrorClass, ProviderError
from .types import (
    Message,
    ModelRequest,
    StreamDone,
    StreamEvent,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolUseBlock,
    Usage,
)

DEMO_REPLY = (
    "**Offline demo** — no model is configured, so I can only echo you.\n\n"
    "You said: {input}\n\n"
    "Run `habakkuk setup` to connect Anthropic, OpenAI or any OpenAI-compatible server."
)


# The model name under which an unscripted mock provider plays the demo tour.
TOUR_MODEL = "tour"


@dataclass
class Step:
    """One scripted reply."""

    text: str = ""
    thinking: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    error: ErrorClass | None = None
    # Text by the outcome of the previous step's tool calls (`text` when none matches).
    after: dict[str, str] = field(default_factory=dict)

    def text_after(self, messages: list[Message]) -> str:
        """The step's text for what happened to the calls answered in the last message."""
        if not self.after or not messages or messages[-1].role != "user":
            return self.text
        outcomes = [stored_outcome(r.text, r.is_error) for r in messages[-1].tool_results]
        if not outcomes:
            return self.text
        # The worst outcome speaks for the batch: one denied call means not all of it ran.
        worst = max(outcomes, key=_SEVERITY.index)
        return self.after.get(worst, self.text)


# Outcomes from the least to the most notable, for a batch of calls.
_SEVERITY: list[Outcome] = ["ok", "error", "interrupted", "not_run", "denied"]


@dataclass
class Scenario:
    steps: list[Step]
    match: re.Pattern[str] | None = None


def _parse_step(raw: Any, where: str) -> Step:
    if isinstance(raw, str):
        return Step(text=raw)
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a step must be text or a mapping")
    unknown = set(raw) - {"text", "thinking", "tool_calls", "error", "after"}
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r} in a mock step")
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list) or not all(
        isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls
    ):
        raise ConfigError(f"{where}: tool_calls must be a list of {{name, arguments}}")
    for call in calls:
        if not isinstance(call.get("arguments", {}), dict):
            raise ConfigError(f"{where}: tool call arguments must be a mapping")
    after = raw.get("after") or {}
    if not isinstance(after, dict) or not all(isinstance(v, str) for v in after.values()):
        raise ConfigError(f"{where}.after: must map outcomes to text")
    error = raw.get("error")
    error_class = next((c for c in ERROR_CLASSES if c == error), None)
    if error is not None and error_class is None:
        raise ConfigError(
            f"{where}.error: unknown error class {error!r} (one of {', '.join(ERROR_CLASSES)})"
        )
    wrong = sorted(set(after) - set(OUTCOMES))
    if wrong:
        raise ConfigError(
            f"{where}.after: unknown outcome {wrong[0]!r} (one of {', '.join(OUTCOMES)})"
        )
    return Step(
        text=str(raw.get("text", "")),
        thinking=str(raw.get("thinking", "")),
        tool_calls=calls,
        error=error_class,
        after=after,
    )


def parse_script(raw: list[Any] | None, where: str) -> list[Scenario]:
    """Validate a script from config or a file into scenarios."""
    if not raw:
        return [Scenario(steps=[Step(text=DEMO_REPLY)])]
    if all(isinstance(item, dict) and "steps" in item for item in raw):
        scenarios = []
        for i, item in enumerate(raw):
            pattern = item.get("match")
            try:
                compiled = re.compile(pattern, re.IGNORECASE) if pattern else None
            except re.error as exc:
                raise ConfigError(f"{where}[{i}].match: bad regex: {exc}") from None
            steps = [
                _parse_step(s, f"{where}[{i}].steps[{j}]") for j, s in enumerate(item["steps"])
            ]
            scenarios.append(Scenario(steps=steps, match=compiled))
        return scenarios
    return [Scenario(steps=[_parse_step(s, f"{where}[{i}]") for i, s in enumerate(raw)])]


def load_script_file(path: Path) -> list[Any]:
    """Read a YAML or JSON script file."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read mock script: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid mock script: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, list):
        raise ConfigError(f"{path}: a mock script is a list of steps or scenarios")
    return data


def _turn_position(messages: list[Message]) -> tuple[str, int]:
    """The user's text that started this turn, and how many model calls it has had."""
    step = 0
    for message in reversed(messages):
        if message.role == "assistant":
            step += 1
            continue
        typed = next((b.text for b in message.blocks if isinstance(b, TextBlock) and b.text), "")
        if typed:
            return typed, step
    return "", step


class MockProvider:
    """Scripted replies, streamed in small pieces like a real model."""

    def __init__(
        self,
        name: str,
        scenarios: list[Scenario],
        *,
        chunk_delay: float = 0.0,
        tour: bool = False,
    ):
        self.name = name
        self.scenarios = scenarios
        self.chunk_delay = chunk_delay
        # Unscripted providers offer the demo tour as the model `tour`.
        self._tour = tour

    def _scenarios_for(self, model: str) -> tuple[list[Scenario], float]:
        """The script and streaming pace for a request's model."""
        if self._tour and model == TOUR_MODEL:
            from .demo_tour import TOUR_CHUNK_DELAY

            return _tour_scenarios(), TOUR_CHUNK_DELAY
        return self.scenarios, self.chunk_delay

    def _step_for(self, messages: list[Message], scenarios: list[Scenario]) -> tuple[Step, str]:
        user_text, index = _turn_position(messages)
        for scenario in scenarios:
            if scenario.match is None or scenario.match.search(user_text):
                steps = scenario.steps
                if index < len(steps):
                    return steps[index], user_text
                return Step(text="done."), user_text
        return Step(text="done."), user_text

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Yield the scripted step's thinking, text and tool calls, then StreamDone."""
        scenarios, delay = self._scenarios_for(request.model)
        step, user_text = self._step_for(request.messages, scenarios)
        if step.error:
            raise ProviderError(step.error, f"scripted {step.error}", provider=self.name)
        blocks: list[Any] = []
        if step.thinking:
            for piece in _pieces(step.thinking):
                yield ThinkingDelta(piece)
                await self._pause(delay)
            blocks.append(ThinkingBlock(step.thinking, provider=self.name))
        text = step.text_after(request.messages).replace("{input}", user_text)
        if text:
            for piece in _pieces(text):
                yield TextDelta(piece)
                await self._pause(delay)
            blocks.append(TextBlock(text))
        for call in step.tool_calls:
            call_id = str(call.get("id") or f"toolu_{uuid.uuid4().hex[:16]}")
            arguments = dict(call.get("arguments") or {})
            yield ToolCallStart(call_id, call["name"])
            yield ToolCallDelta(call_id, json.dumps(arguments))
            blocks.append(ToolUseBlock(call_id, call["name"], arguments))
        prompt_chars = len(request.system_text) + sum(
            len(json.dumps(m.to_json())) for m in request.messages
        )
        usage = Usage(input_tokens=max(1, prompt_chars // 4), output_tokens=max(1, len(text) // 4))
        stop = "tool_use" if step.tool_calls else "end_turn"
        yield StreamDone(Message("assistant", blocks, model=request.model), usage, stop)

    async def _pause(self, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)


@functools.cache
def _tour_scenarios() -> list[Scenario]:
    from .demo_tour import TOUR

    return parse_script(TOUR, "the demo tour")


def _pieces(text: str) -> list[str]:
    """Split text into word-sized pieces (keeping whitespace) to imitate streaming."""
    return re.findall(r"\S+\s*|\s+", text) or [text]
