"""`habakkuk checkpoints` and `habakkuk rollback`: an agent's workspace checkpoints."""

from __future__ import annotations

import argparse
import sys

from habakkuk.cli.common import ask, count, open_runtime, run_async
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `habakkuk checkpoints` or `habakkuk rollback`."""
    parser.add_argument("--agent", help="agent name (default: the first agent)")
    if command == "checkpoints":
        parser.add_argument("-n", type=count, default=20, help="how many (default 20)")
        return
    parser.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("id", help="checkpoint id (a unique prefix is enough)")
    parser.add_argument("path", nargs="?", help="restore only this path of the workspace")


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk checkpoints` or `habakkuk rollback` (the exit code)."""
    return checkpoints(args) if args.command == "checkpoints" else rollback(args)


def checkpoints(args: argparse.Namespace) -> int:
    """`habakkuk checkpoints`: the agent's workspace checkpoints, newest first."""
    return run_async(_checkpoints(args.agent, args.n))


async def _checkpoints(agent: str | None, n: int) -> int:
    from habakkuk.tools.checkpoints import CheckpointError

    runtime = await open_runtime()
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
    return run_async(_rollback(args.agent, args.id, args.path, args.yes))


async def _rollback(agent: str | None, checkpoint_id: str, path: str | None, yes: bool) -> int:
    import asyncio

    from habakkuk.tools.checkpoints import CheckpointError

    runtime = await open_runtime()
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
                answer = await asyncio.to_thread(ask, "restore these changes? [y/N] ")
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
