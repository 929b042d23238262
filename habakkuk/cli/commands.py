"""The CLI commands. Each runs the runtime through its facade and prints for humans or JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error_line, exit_code
from habakkuk.engine.starter import SMOKE_CONFIG, STARTER_CONFIG
from habakkuk.engine.timeouts import wait_within

if TYPE_CHECKING:
    from habakkuk.engine.home import Home
    from habakkuk.engine.sessions import Session
    from habakkuk.runtime import Runtime


def _home() -> Home:
    from habakkuk.engine.home import Home, default_home

    return Home(default_home())


async def _open(home: Home | None = None) -> Runtime:
    from habakkuk.runtime import Runtime

    return await Runtime.open(home)


# -- run ---------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """`habakkuk run PROMPT`: queue a turn, work until it is done, print the reply.

    With no PROMPT, or `-`, the prompt is read from standard input. With --skill NAME the
    message is the skill's invocation (its SKILL.md body and files), then PROMPT if any.
    """
    words = list(args.prompt)
    skill = getattr(args, "skill", None)
    if skill:
        request = sys.stdin.read().rstrip("\r\n") if words == ["-"] else " ".join(words)
        return asyncio.run(_run(request, args.agent, args.session, args.json, skill=skill))
    if words in ([], ["-"]):
        if not words and sys.stdin.isatty():
            print("habakkuk: run: give a prompt, or pipe one in", file=sys.stderr)
            return EXIT_USAGE
        prompt = sys.stdin.read().rstrip("\r\n")
    else:
        prompt = " ".join(words)
    if not prompt.strip():
        print("habakkuk: run: the prompt is empty", file=sys.stderr)
        return EXIT_USAGE
    return asyncio.run(_run(prompt, args.agent, args.session, args.json))


async def _run(
    prompt: str, agent: str | None, session_id: str | None, as_json: bool, *, skill: str = ""
) -> int:
    from habakkuk.conversation.commands import parse
    from habakkuk.engine.errors import NotFound

    if not skill and parse(prompt) is not None:
        return await _run_command(prompt, agent, session_id, as_json)
    runtime = await _open()
    try:
        if session_id:
            try:
                session = await runtime.sessions.session(session_id)
            except NotFound as exc:  # a session the user named (engine/exit_codes.py)
                print(error_line("", exc), file=sys.stderr)
                return exit_code(exc)
            if agent and agent != session.agent:
                print(
                    f"habakkuk: session {session_id} belongs to agent {session.agent!r}",
                    file=sys.stderr,
                )
                return EXIT_USAGE
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
            print(
                f"habakkuk: turn {outcome.status}: {outcome.error or ''}".rstrip(": "),
                file=sys.stderr,
            )
    return EXIT_OK if outcome.status == "done" else EXIT_FAILED


async def _run_command(text: str, agent: str | None, session_id: str | None, as_json: bool) -> int:
    """`habakkuk run [--session S] "/command"`: print the chat command's answer;
    exit 2 when the command refused (unknown, bad arguments)."""
    from habakkuk.conversation.commands import dispatch, plain
    from habakkuk.conversation.run import RunConversation
    from habakkuk.engine.errors import NotFound

    runtime = await _open()
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


# -- serve -------------------------------------------------------------------------------


def serve(args: argparse.Namespace) -> int:
    """`habakkuk --serve`: every worker, until SIGINT or SIGTERM."""
    return asyncio.run(_serve())


async def _serve() -> int:
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    runtime = await _open()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await runtime.start_mcp()  # MCP servers first (at most 20 s; slow ones keep trying)
        runtime.start_workers(maintenance=True)
        print(
            f"habakkuk: serving {runtime.home.root} (pid {os.getpid()})",
            file=sys.stderr,
            flush=True,
        )
        if runtime.config.http is not None:
            await runtime.http.serve(lambda line: print(f"habakkuk: {line}", file=sys.stderr))
        await stop.wait()
        print("habakkuk: shutting down", file=sys.stderr, flush=True)
    finally:
        await runtime.close()
    return EXIT_OK


# -- sessions ------------------------------------------------------------------------------


def sessions_list(args: argparse.Namespace) -> int:
    """`habakkuk sessions list [--agent A] [--limit N] [--json] [--all]`: the user's
    sessions, newest first (`--all`: board cards' and sub-agents' too)."""
    return asyncio.run(_sessions_list(args.agent, args.limit, args.json, args.all))


async def _sessions_list(agent: str | None, limit: int, as_json: bool, everything: bool) -> int:
    runtime = await _open()
    try:
        sessions = await runtime.sessions.list_sessions(agent, limit=limit, include_work=everything)
    finally:
        await runtime.close()
    none = (
        "no sessions yet"
        if everything
        else "no sessions yet (--all lists board and sub-agent runs)"
    )
    return _print_sessions(sessions, as_json, none)


def sessions_search(args: argparse.Namespace) -> int:
    return asyncio.run(_sessions_search(" ".join(args.query), args.agent))


async def _sessions_search(query: str, agent: str | None) -> int:
    runtime = await _open()
    try:
        if agent:
            runtime.config.agent(agent)
        hits = await runtime.transcripts.search(query, agent=agent)
    finally:
        await runtime.close()
    for hit in hits:
        print(f"{hit.session}  #{hit.seq:<4} {hit.role:<9} {hit.snippet}")
    if not hits:
        within = f" of agent {agent}" if agent else ""
        print(f"no messages{within} match {query!r}", file=sys.stderr)
    return EXIT_OK if hits else EXIT_FAILED


def sessions_export(args: argparse.Namespace) -> int:
    return asyncio.run(_sessions_export(args.id, args.format, args.output))


async def _sessions_export(session_id: str, fmt: str, output: str | None) -> int:
    from habakkuk.engine.errors import HabakkukError
    from habakkuk.engine.export import save_export

    runtime = await _open()
    try:
        text = await runtime.sessions.export_session(session_id, fmt)
    finally:
        await runtime.close()
    if not output:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        where = save_export(runtime.home.root, session_id, fmt, text, output)
    except HabakkukError as exc:  # a bad -o path is the caller's to fix: one line, exit 2
        print(f"habakkuk: sessions export: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {where}", file=sys.stderr)
    return EXIT_OK


def sessions_compact(args: argparse.Namespace) -> int:
    """`habakkuk sessions compact ID`: run a compaction as a turn of the session."""
    return asyncio.run(_sessions_compact(args.id, args.json))


async def _sessions_compact(session_id: str, as_json: bool) -> int:
    runtime = await _open()
    try:
        await runtime.sessions.session(session_id)
        runtime.start_workers(channels=False)
        job = await runtime.turns.compact_session(session_id)
        outcome = await runtime.turns.wait_turn(job)
        finished = await runtime.queue.get(job)
        result = (finished.result if finished else None) or {}
    finally:
        await runtime.close()
    if as_json:
        body: dict[str, Any] = {
            "session": session_id,
            "job": job,
            "status": "done" if outcome.status == "done" else "failed",
            **{
                k: result[k]
                for k in ("compacted", "tokens_before", "tokens_after", "dropped")
                if k in result
            },
            "reply": outcome.reply,
        }
        if outcome.status != "done":
            body["error"] = outcome.error or outcome.status
        print(json.dumps(body, ensure_ascii=False))
    elif outcome.status == "done":
        print(outcome.reply)
    else:
        print(
            f"habakkuk: compaction {outcome.status}: {outcome.error or ''}".rstrip(": "),
            file=sys.stderr,
        )
    return EXIT_OK if outcome.status == "done" else EXIT_FAILED


def sessions_archive(args: argparse.Namespace) -> int:
    """`habakkuk sessions archive ID...`: hide sessions from the recent list."""
    return asyncio.run(_sessions_each(args.ids, "archive"))


def sessions_unarchive(args: argparse.Namespace) -> int:
    """`habakkuk sessions unarchive ID...`: bring archived sessions back."""
    return asyncio.run(_sessions_each(args.ids, "unarchive"))


def sessions_rm(args: argparse.Namespace) -> int:
    """`habakkuk sessions rm ID... [-y]`: delete sessions for good (asks on a terminal)."""
    if not args.yes:
        if not sys.stdin.isatty():
            print("habakkuk: sessions rm: not a terminal; pass -y to delete", file=sys.stderr)
            return EXIT_USAGE
        names = " ".join(args.ids)
        answer = _ask(f"delete {names} for good (transcript, search index, state)? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing deleted", file=sys.stderr)
            return EXIT_FAILED
    return asyncio.run(_sessions_each(args.ids, "rm"))


async def _sessions_each(ids: list[str], action: str) -> int:
    """Apply archive, unarchive or rm to each id; one line per id that failed (exit 2)."""
    from habakkuk.engine.errors import HabakkukError

    done = {"archive": "archived", "unarchive": "unarchived", "rm": "deleted"}[action]
    failed = False
    runtime = await _open()
    try:
        for session_id in ids:
            try:
                if action == "rm":
                    await runtime.sessions.delete_session(session_id)
                else:
                    await runtime.sessions.archive_session(session_id, action == "archive")
            except HabakkukError as exc:
                print(error_line(f"sessions {action}", exc), file=sys.stderr)
                failed = True
                continue
            print(f"{done} {session_id}")
    finally:
        await runtime.close()
    return EXIT_USAGE if failed else EXIT_OK


def sessions_archived(args: argparse.Namespace) -> int:
    """`habakkuk sessions archived [--json] [--all]`: the archived sessions, newest first."""
    return asyncio.run(_sessions_archived(args.json, args.all))


async def _sessions_archived(as_json: bool, everything: bool) -> int:
    runtime = await _open()
    try:
        sessions = await runtime.sessions.list_sessions(
            limit=1000, archived=True, include_work=everything
        )
    finally:
        await runtime.close()
    return _print_sessions(sessions, as_json, "no archived sessions")


def _print_sessions(sessions: list[Session], as_json: bool, none: str) -> int:
    """One line per session (or a JSON array); `none` goes to stderr when there are none."""
    from habakkuk.engine.export import rfc3339, session_json

    if as_json:
        print(json.dumps([session_json(s) for s in sessions], ensure_ascii=False))
        return EXIT_OK
    for s in sessions:
        print(f"{s.id}  {rfc3339(s.updated_at)}  {s.agent:<12}  {s.title}")
    if not sessions:
        print(none, file=sys.stderr)
    return EXIT_OK


# -- checkpoints -----------------------------------------------------------------------------


def checkpoints(args: argparse.Namespace) -> int:
    """`habakkuk checkpoints`: the agent's workspace checkpoints, newest first."""
    return asyncio.run(_checkpoints(args.agent, args.n))


async def _checkpoints(agent: str | None, n: int) -> int:
    from habakkuk.tools.checkpoints import CheckpointError

    runtime = await _open()
    try:
        store = runtime.checkpointing.for_agent(agent)
        if store is None:
            print("habakkuk: checkpoints are off (checkpoints: false, or no git)", file=sys.stderr)
            return EXIT_FAILED
        try:
            found = await store.list(n)
        except CheckpointError as exc:
            print(f"habakkuk: {exc}", file=sys.stderr)
            return EXIT_FAILED
    finally:
        await runtime.close()
    for c in found:
        request = " ".join(c.request.split())
        request = request if len(request) <= 60 else request[:59] + "…"
        stamp = c.created_at.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        print(f"{c.id[:12]}  {stamp}  {c.kind:<8}  {c.session or '-':<20}  {request}")
    if not found:
        print("no checkpoints yet", file=sys.stderr)
    return EXIT_OK


def rollback(args: argparse.Namespace) -> int:
    """`habakkuk rollback ID [PATH]`: show the diff stat, confirm, restore."""
    return asyncio.run(_rollback(args.agent, args.id, args.path, args.yes))


async def _rollback(agent: str | None, checkpoint_id: str, path: str | None, yes: bool) -> int:
    from habakkuk.tools.checkpoints import CheckpointError

    runtime = await _open()
    try:
        store = runtime.checkpointing.for_agent(agent)
        if store is None:
            print("habakkuk: checkpoints are off (checkpoints: false, or no git)", file=sys.stderr)
            return EXIT_FAILED
        try:
            stat = await store.diff_stat(checkpoint_id, path)
            if stat.strip() == "no changes":
                print("the workspace already matches that checkpoint; nothing to do")
                return EXIT_OK
            print(stat.rstrip())
            if not yes:
                answer = await asyncio.to_thread(_ask, "restore these changes? [y/N] ")
                if answer.strip().lower() not in ("y", "yes"):
                    print("not restored", file=sys.stderr)
                    return EXIT_FAILED
            await store.restore(checkpoint_id, path)
        except CheckpointError as exc:
            print(f"habakkuk: {exc}", file=sys.stderr)
            return EXIT_USAGE
    finally:
        await runtime.close()
    print("restored (the replaced state was checkpointed first; `habakkuk checkpoints` lists it)")
    return EXIT_OK


def _ask(prompt: str) -> str:
    sys.stdout.write(prompt)
    sys.stdout.flush()
    return sys.stdin.readline()


# -- init, doctor, smoke ---------------------------------------------------------------------


def init(args: argparse.Namespace) -> int:
    """Write the starter config (offline demo) into the home."""
    home = _home()
    path = home.config_path
    if path.exists() and not args.force:
        print(f"habakkuk: {path} exists; use --force to replace it", file=sys.stderr)
        return EXIT_USAGE
    home.prepare()
    if path.exists():
        path.replace(path.with_name("config.yaml.bak"))
    path.write_text(STARTER_CONFIG, encoding="utf-8")
    os.chmod(path, 0o600)
    print(f'wrote {path}\ntry: habakkuk run "hello"')
    return EXIT_OK


def doctor(args: argparse.Namespace) -> int:
    from habakkuk.services.doctor import run_checks

    checks = asyncio.run(run_checks(_home()))
    failed = False
    for check in checks:
        print(check.line())
        failed = failed or check.status == "FAIL"
    if checks and checks[-1].name in ("config", ".env") and checks[-1].status == "FAIL":
        # A config or .env that stopped the checks (unreadable, not UTF-8, invalid) is
        # a usage error, as in every command.
        return EXIT_USAGE
    return EXIT_FAILED if failed else EXIT_OK


# -- setup, usage ---------------------------------------------------------------------------


def setup(args: argparse.Namespace) -> int:
    """`habakkuk setup`: the interactive wizard, then `habakkuk doctor`."""
    from habakkuk.cli.setup import run_setup

    if run_setup(_home()) != EXIT_OK:
        return EXIT_FAILED
    print("\nchecking the new setup (habakkuk doctor):")
    return doctor(args)


def usage(args: argparse.Namespace) -> int:
    """`habakkuk usage`: tokens and dollars by model and agent."""
    if args.days is not None and args.days <= 0:
        print("habakkuk: usage: --days must be more than 0", file=sys.stderr)
        return EXIT_USAGE
    return asyncio.run(_usage(args.days, args.agent, args.json))


async def _usage(days: float | None, agent: str | None, as_json: bool) -> int:
    runtime = await _open()
    try:
        if agent:
            runtime.config.agent(agent)
        totals = await runtime.ledger.usage_totals(days=days, agent=agent)
    finally:
        await runtime.close()
    if as_json:
        print(json.dumps([t.__dict__ for t in totals], ensure_ascii=False))
        return EXIT_OK
    if not totals:
        span = f" in the last {days:g} days" if days is not None else ""
        print(f"no model calls recorded{span}")
        return EXIT_OK
    header = ("MODEL", "AGENT", "CALLS", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "COST")
    rows = [
        (
            t.model,
            t.agent or "-",
            str(t.calls),
            f"{t.input_tokens:,}",
            f"{t.output_tokens:,}",
            f"{t.cache_read_tokens:,}",
            f"{t.cache_write_tokens:,}",
            f"${t.cost:,.4f}" + ("*" if t.unpriced_calls else ""),
        )
        for t in totals
    ]
    rows.append(
        (
            "TOTAL",
            "",
            str(sum(t.calls for t in totals)),
            f"{sum(t.input_tokens for t in totals):,}",
            f"{sum(t.output_tokens for t in totals):,}",
            f"{sum(t.cache_read_tokens for t in totals):,}",
            f"{sum(t.cache_write_tokens for t in totals):,}",
            f"${sum(t.cost for t in totals):,.4f}",
        )
    )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = [
            cell.ljust(widths[i]) if i < 2 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ]
        print("  ".join(cells).rstrip())
    if any(t.unpriced_calls for t in totals):
        print("* some calls were to models with no known price (add them under pricing: in config)")
    return EXIT_OK


def smoke(args: argparse.Namespace) -> int:
    """One full turn with the mock provider in a temporary home."""
    return asyncio.run(_smoke())


async def _smoke() -> int:
    from habakkuk.engine.home import Home

    with tempfile.TemporaryDirectory(prefix="habakkuk-smoke-") as tmp:
        home = Home(Path(tmp))
        home.prepare()
        home.config_path.write_text(SMOKE_CONFIG, encoding="utf-8")
        runtime = await _open(home)
        try:
            session = await runtime.sessions.new_session(origin="smoke")
            runtime.start_workers()
            turn = await runtime.turns.submit(session.id, "smoke test")
            outcome = await wait_within(runtime.turns.wait_turn(turn), 60)
            messages = await runtime.sessions.messages(session.id)
        finally:
            await runtime.close()
    roles = [m.role for m in messages]
    problems = []
    if outcome.status != "done":
        problems.append(f"turn {outcome.status}: {outcome.error}")
    if "smoke reply" not in outcome.reply:
        problems.append(f"unexpected reply {outcome.reply!r}")
    if roles != ["user", "assistant", "user", "assistant"]:
        problems.append(f"unexpected transcript roles {roles}")
    elif messages[2].message.tool_results[0].is_error:
        problems.append(f"tool call failed: {messages[2].message.tool_results[0].text}")
    if problems:
        print("smoke: FAILED: " + "; ".join(problems))
        return EXIT_FAILED
    print("smoke: ok")
    return EXIT_OK


# -- channels ----------------------------------------------------------------------------


def channels(args: argparse.Namespace) -> int:
    """`habakkuk channels`: each channel's health from control.db."""
    from habakkuk.channels.commands import channels_status

    return asyncio.run(channels_status(_home()))


def pair(args: argparse.Namespace) -> int:
    """`habakkuk pair CODE`: approve a chat user's pairing code."""
    from habakkuk.channels.commands import pair as approve

    return asyncio.run(approve(_home(), args.code))


def send(args: argparse.Namespace) -> int:
    """`habakkuk send --to CHANNEL:CHAT[:THREAD] [--file PATH] TEXT`: queue a delivery."""
    from habakkuk.channels.commands import send as queue_send

    return asyncio.run(queue_send(_home(), args.to, " ".join(args.text), args.file))


def mcp_serve(args: argparse.Namespace) -> int:
    """`habakkuk mcp serve`: the runtime with its workers, spoken to over MCP on stdio."""
    return asyncio.run(_mcp_serve())


async def _mcp_serve() -> int:
    import logging

    from habakkuk.protocols.mcp.server import serve_stdio

    # stdout carries the protocol: every log line goes to stderr
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    runtime = await _open()
    try:
        # Turns only: the chat bots belong to `habakkuk serve`, as with `habakkuk run`.
        runtime.start_workers(channels=False)
        await serve_stdio(runtime)
    finally:
        await runtime.close()
    return EXIT_OK


def tui(args: argparse.Namespace) -> int:
    """`habakkuk`: the terminal app (`--resume` opens the session picker first)."""
    from habakkuk.engine.config import load_config
    from habakkuk.engine.home import check_home_root, read_env_file

    home = _home()
    check_home_root(home.root)
    config = None
    if home.config_path.exists():
        # A bad config is one line on the terminal, not a crash inside the full-screen app;
        # the app's runtime opens with this config instead of reading the file again.
        config = load_config(home)
        config.agent(None)
    read_env_file(home.env_path)  # likewise a .env that is not UTF-8 (ConfigError)
    from habakkuk.app import run_app

    return run_app(resume=bool(getattr(args, "resume", False)), config=config)
