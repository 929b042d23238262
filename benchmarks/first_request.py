"""What a first message costs before the user's first word: the first request's bytes.

Builds a fresh home, opens the real runtime on it (the real toolset builders and the real
prompt builder), starts a chat session as the terminal app does and runs one turn of
"hello" through the turn loop, recording the ModelRequest the turn hands the router. That
request is then serialized as each adapter would send it (Anthropic's `messages.create`
parameters, OpenAI's chat completions parameters, as compact JSON) and measured: the
system text, the tool schemas and the whole request, in bytes and estimated tokens
(bytes / 4), for the default agent (the starter config: no `toolsets:`) and for an agent
with every toolset on (the web chat's channel tools, `images:`, `video:`, `tts:`).

Usage: PYTHONPATH=$PWD python benchmarks/first_request.py [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AGENT = "habakkuk"
DEFAULT_CONFIG = f"""\
providers:
  demo:
    type: mock
agents:
  {AGENT}:
    model: demo/echo
    mode: workspace
timezone: UTC
"""
# Every optional toolset on: the web chat (send_file, poll), speech (speak), images and
# video generation. No network: nothing here is called, only offered.
EVERYTHING_CONFIG = (
    DEFAULT_CONFIG
    + """\
http:
  listen: 127.0.0.1:0
images: {provider: openai}
video: {provider: gemini, seconds: 8}
tts: {provider: espeak}
"""
)


@dataclass(frozen=True)
class Figures:
    """One configuration's first request, measured."""

    label: str
    tools: int
    system: int
    anthropic_tools: int
    anthropic_request: int
    openai_tools: int
    openai_request: int

    @property
    def budget(self) -> int:
        """Tools plus system text as Anthropic gets them (the larger of the two shapes)."""
        return self.system + max(self.anthropic_tools, self.openai_tools)


def _size(value: Any) -> int:
    """Bytes of `value` as compact UTF-8 JSON (what the SDKs put on the wire)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8"))


async def first_request(config_text: str) -> Any:
    """The ModelRequest of a fresh home's first "hello" in a chat session."""
    from habakkuk.engine.config import parse_config
    from habakkuk.engine.home import Home
    from habakkuk.runtime import Runtime

    with tempfile.TemporaryDirectory() as root:
        home = Home(Path(root) / "home")
        home.prepare()
        home.config_path.write_text(config_text, encoding="utf-8")
        config = parse_config(config_text, home.config_path, home)
        runtime = await Runtime.open(home, config)
        seen: list[Any] = []
        complete = runtime.router.complete

        async def recording(chain: Any, request: Any, **kwargs: Any) -> Any:
            seen.append(request)
            return await complete(chain, request, **kwargs)

        runtime.router.complete = recording  # type: ignore[method-assign]  # reason: a probe
        try:
            session = await runtime.sessions.new_session(AGENT, chat=True)
            runtime.start_workers(channels=False)
            turn = await runtime.turns.submit(session.id, "hello")
            outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), 60)
            if outcome.status != "done":
                raise SystemExit(f"the turn ended {outcome.status}: {outcome.error}")
        finally:
            await runtime.close()
        return seen[0]


def measure(label: str, request: Any) -> Figures:
    """`request` serialized by the Anthropic and OpenAI adapters, measured."""
    from dataclasses import replace

    from habakkuk.engine.llm.adapters import anthropic, openai_chat

    request = replace(request, model="claude-sonnet-4-6")
    a_params = anthropic.build_params(request)
    o_params = openai_chat.build_params(replace(request, model="gpt-5-mini"), official=True)
    return Figures(
        label=label,
        tools=len(request.tools),
        system=len(request.system_text.encode("utf-8")),
        anthropic_tools=_size(a_params.get("tools", [])),
        anthropic_request=_size(a_params),
        openai_tools=_size(o_params.get("tools", [])),
        openai_request=_size(o_params),
    )


def _kb(n: int) -> str:
    return f"{n:>7,} B {n / 1024:5.1f} KB ~{n // 4:>6,} tok"


def report(figures: Figures, names: list[str]) -> None:
    print(f"== {figures.label}: {figures.tools} tools offered")
    print(f"   system text          {_kb(figures.system)}")
    print(f"   tools (Anthropic)    {_kb(figures.anthropic_tools)}")
    print(f"   tools (OpenAI)       {_kb(figures.openai_tools)}")
    print(f"   request (Anthropic)  {_kb(figures.anthropic_request)}")
    print(f"   request (OpenAI)     {_kb(figures.openai_request)}")
    print(f"   tools + system       {_kb(figures.budget)}  (budget 8 KB = 8,192 B)")
    print(f"   offered: {', '.join(names)}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    os.environ.setdefault("HABAKKUK_NO_KEYRING", "1")
    results = []
    for label, text in (("default agent", DEFAULT_CONFIG), ("every toolset", EVERYTHING_CONFIG)):
        request = await first_request(text)
        figures = measure(label, request)
        report(figures, [t.name for t in request.tools])
        results.append(figures)
    if args.json:
        print(json.dumps([f.__dict__ for f in results], indent=2))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    asyncio.run(main())
