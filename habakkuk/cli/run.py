"""`habakkuk run PROMPT`: one turn (or a chat /command) from the shell, its reply printed."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from habakkuk.cli.common import collector_held, current_home, open_runtime, run_async
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error_line, exit_code
from habakkuk.engine.i18n import t  # stdlib-only at import: the catalog is read on first use

if TYPE_CHECKING:
    from collections.abc import Callable

    from habakkuk.engine.home import Home
    from habakkuk.engine.llm.factory import ProviderHub
    from habakkuk.runtime import Runtime


def add_arguments(command: str, run: argparse.ArgumentParser) -> None:
    """Declare the arguments of `habakkuk run`."""
    run.add_argument("--agent", help="agent name (default: the first agent)")
    run.add_argument("--session", help="continue this session")
    run.add_argument("--json", action="store_true", help="print one JSON object at the end")
    run.add_argument(
        "--skill", metavar="NAME", help="use this skill: its instructions, then PROMPT if given"
    )
    run.add_argument(
        "prompt",
        nargs="*",
        help="what to ask, or a chat /command (none, or -, reads it from standard input)",
    )


def main(args: argparse.Namespace) -> int:
    """`habakkuk run PROMPT`: queue a turn, work until it is done, print the reply.

    With no PROMPT, or `-`, the prompt is read from standard input. With --skill NAME the
    message is the skill's invocation (its SKILL.md body and files), then PROMPT if any.
    """
    words = list(args.prompt)
    skill = getattr(args, "skill", None)
    if skill:
        request = sys.stdin.read().rstrip("\r\n") if words == ["-"] else " ".join(words)
        return _run_held(request, args, skill=skill)
    if words in ([], ["-"]):
        if not words and sys.stdin.isatty():
            print(error_line("run", t("cli.run.no_prompt")), file=sys.stderr)
            return EXIT_USAGE
        prompt = sys.stdin.read().rstrip("\r\n")
    else:
        prompt = " ".join(words)
    if not prompt.strip():
        print(error_line("run", t("cli.run.empty_prompt")), file=sys.stderr)
        return EXIT_USAGE
    return _run_held(prompt, args)


def _run_held(prompt: str, args: argparse.Namespace, *, skill: str = "") -> int:
    """`_run`, the garbage collector held off until its start-up is over (collector_held)."""
    with collector_held() as started:
        return run_async(
            _run(prompt, args.agent, args.session, args.json, skill=skill, started=started)
        )


def _warming_hub(agent: str | None, session_id: str | None) -> tuple[Home, ProviderHub]:
    """The home's providers on its config, the model client a new session's turn calls
    first already being made on a worker thread (ProviderHub.warm): the model SDK's
    import, a third of a second, runs beside the runtime's own start (its modules, its
    stores, the session) rather than after it. A named session's model is known only
    once the stores are open: its client is warmed then (`_run`). The SDK imports no
    module of ours, and the few modules both sides import have no import cycle between
    them, so the two threads' imports only ever wait for each other."""
    from habakkuk.engine.config import load_config
    from habakkuk.engine.home import Environment
    from habakkuk.engine.llm.adapters.sdk_http import send_one_shot
    from habakkuk.engine.llm.factory import ProviderHub

    send_one_shot()  # a few calls, then exit: aiohttp's import would cost more than it saves
    home = current_home()
    config = load_config(home)
    home.prepare()
    hub = ProviderHub(config, Environment(home.env_path), home.root)
    if not session_id:
        hub.warm_first(agent)
    return home, hub


async def _run(
    prompt: str,
    agent: str | None,
    session_id: str | None,
    as_json: bool,
    *,
    skill: str = "",
    started: Callable[[], None] = lambda: None,
) -> int:
    import asyncio

    from habakkuk.engine.errors import NotFound

    # Only a "/" can start a command: a plain prompt never loads the command modules.
    if not skill and prompt.strip().startswith("/"):
        from habakkuk.conversation.commands import parse

        if parse(prompt) is not None:
            return await _run_command(prompt, agent, session_id, as_json)
    home, hub = _warming_hub(agent, session_id)
    runtime = await open_runtime(home, hub)
    try:
        if session_id:
            try:
                session = await runtime.sessions.session(session_id)
            except NotFound as exc:  # a session the user named (engine/exit_codes.py)
                print(error_line("", exc), file=sys.stderr)
                return exit_code(exc)
            if agent and agent != session.agent:
                line = t("cli.run.other_agent", session=session_id, agent=session.agent)
                print(error_line("", line), file=sys.stderr)
                return EXIT_USAGE
            hub.warm_first(session.agent, await runtime.settings.session_model(session_id))
        if skill:
            # The skill first: a name that matches nothing leaves no empty session behind.
            owner = session.agent if session_id else runtime.config.agent(agent).name
            try:  # the same message as /skill NAME REQUEST
                prompt = await runtime.skills.invocation(owner, skill, prompt)
            except NotFound as exc:
                print(error_line("run --skill", exc), file=sys.stderr)
                return exit_code(exc)
        if not session_id:
            session = await runtime.sessions.new_session(agent, origin="cli")
        streamed = asyncio.create_task(_stream(runtime, session.id)) if not as_json else None
        await runtime.start_mcp()  # MCP tools for the turn (at most 20 s)
        # One turn from the shell must not take over the chat bots `serve` runs.
        runtime.start_workers(channels=False)
        turn = await runtime.turns.submit(session.id, prompt)
        await hub.warmed()  # the model SDK loaded: start-up is over
        started()
        outcome = await runtime.turns.wait_turn(turn)
        if streamed is not None:
            streamed.cancel()
            await asyncio.gather(streamed, return_exceptions=True)
    finally:
        await runtime.close()
    if as_json:
        body: dict[str, Any] = {
            "session": outcome.session,
            "turn": outcome.turn,
            "status": "done" if outcome.status == "done" else "failed",
            "reply": outcome.reply,
        }
        if outcome.status != "done":
            body["error"] = outcome.error or outcome.status
        print(json.dumps(body, ensure_ascii=False))
    else:
        sys.stdout.write("\n")
        if outcome.status != "done":
            ended = t("cli.run.turn_ended", status=outcome.status)
            print(error_line("", f"{ended}: {outcome.error or ''}".rstrip(": ")), file=sys.stderr)
    return EXIT_OK if outcome.status == "done" else EXIT_FAILED


async def _run_command(text: str, agent: str | None, session_id: str | None, as_json: bool) -> int:
    """`habakkuk run [--session S] "/command"`: print the chat command's answer;
    exit 2 when the command refused (unknown, bad arguments)."""
    from habakkuk.conversation.commands import dispatch, plain
    from habakkuk.conversation.run import RunConversation
    from habakkuk.engine.errors import NotFound

    runtime = await open_runtime()
    try:
        if session_id:
            try:
                await runtime.sessions.session(session_id)
            except NotFound as exc:  # a session the user named: bad usage
                print(f"habakkuk: {exc}", file=sys.stderr)
                return EXIT_USAGE
        conv = RunConversation(runtime, session_id, agent)
        reply = await dispatch(text, conv)
    finally:
        await runtime.close()
    assert reply is not None
    if as_json:
        print(
            json.dumps(
                {"session": conv.session_id, "reply": reply.text, "error": reply.error},
                ensure_ascii=False,
            )
        )
    elif reply.text:
        print(plain(reply.text), file=sys.stderr if reply.error else sys.stdout)
    return EXIT_USAGE if reply.error else EXIT_OK


async def _stream(runtime: Runtime, session_id: str) -> None:
    """Print the turn's text as it streams; tool activity goes to stderr."""
    from habakkuk.engine.events import ToolEnded, ToolStarted, TurnReset, TurnText

    shown = (TurnText, TurnReset, ToolStarted, ToolEnded)
    with runtime.bus.subscribe(
        lambda e: e.session == session_id and isinstance(e, shown)
    ) as events:
        async for event in events:
            match event:
                case TurnText(text=text):
                    sys.stdout.write(text)
                    sys.stdout.flush()
                case TurnReset():
                    sys.stdout.write("\n[retrying]\n")
                case ToolStarted():
                    print(f"\n· {event.tool}: {event.title}", file=sys.stderr)
                case ToolEnded(is_error=True):
                    print(f"  ✗ {event.preview[:200]}", file=sys.stderr)
