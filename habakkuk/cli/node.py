"""`habakkuk node pair|run` and `habakkuk nodes [list|revoke NAME]` (spec 000 "Device nodes").

- `node pair` (on the server): a one-time code (stored hashed, nodes.pair_ttl), the
  command to run on the device, and a QR code of `<nodes.url>/app/pair.html#CODE`.
- `node run --server URL --code CODE --name NAME` (on the device): pairs once (node.json,
  mode 0600, in the device's home), then holds the connection; later runs need no code.
- `nodes` / `nodes list`: the paired nodes; `nodes revoke NAME`: its secret stops
  working, and the server cuts a live connection within one heartbeat.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from habakkuk.cli.common import current_home, run_async
from habakkuk.engine.exit_codes import EXIT_OK
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.engine.config import Config
    from habakkuk.engine.home import Home
    from habakkuk.protocols.nodes.store import NodeStore


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """`node pair`, `node run ...`; `nodes [list]`, `nodes revoke NAME`."""
    if command == "nodes":
        actions = parser.add_subparsers(dest="action", metavar="ACTION")
        actions.add_parser("list", help="the paired nodes (the default)")
        revoke = actions.add_parser("revoke", help="revoke a node: its secret stops working")
        revoke.add_argument("name", help="the node's name")
        return
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("pair", help="make a one-time pairing code (on the server)")
    run = actions.add_parser("run", help="lend this device to the server (on the device)")
    run.add_argument("--server", help="the server's URL, e.g. https://habakkuk.example:8484")
    run.add_argument("--code", help="the pairing code from `habakkuk node pair` (first run)")
    run.add_argument("--name", help="this node's name (letters, digits, . _ -)")
    run.add_argument("--allow-run", action="store_true", help="offer system.run (shell commands)")
    run.add_argument("--allow-camera", action="store_true", help="offer camera.snap (ffmpeg)")
    run.add_argument("--dir", type=Path, help="offer files.get/files.put inside this folder")


def main(args: argparse.Namespace) -> int:
    """Run the chosen action (the exit code)."""
    if args.command == "nodes":
        if getattr(args, "action", None) == "revoke":
            return run_async(_revoke(args.name))
        return run_async(_list())
    if args.action == "pair":
        return run_async(_pair())
    return run_async(_run(args))


def _config(home: Home) -> Config:
    from habakkuk.engine.config import load_config
    from habakkuk.engine.errors import BadInput

    config = load_config(home)
    if config.nodes is None:
        raise BadInput.said("nodes.not_configured")
    return config


async def _store() -> tuple[Config, NodeStore]:
    import asyncio

    from habakkuk.engine.storage import open_storage
    from habakkuk.protocols.nodes.store import NodeStore

    home = current_home()
    config = _config(home)
    storage = await asyncio.to_thread(open_storage, home, config)
    return config, await NodeStore.open_on(storage)


async def _pair() -> int:
    import io
    import time

    import segno

    config, store = await _store()
    nodes = config.nodes
    if nodes is None:  # _config checked it
        return EXIT_OK
    try:
        code = await store.new_code(nodes.pair_ttl_seconds)
    finally:
        await store.close()
    minutes = max(1, round((code.expires - time.time()) / 60))
    print(t("nodes.pair_code", code=code.code, minutes=minutes))
    print(t("nodes.pair_command"))
    print(f"  habakkuk node run --server {nodes.url} --code {code.code} --name NAME")
    page = f"{nodes.url}/app/pair.html#{code.code}"
    print(t("nodes.pair_qr", url=page))
    drawn = io.StringIO()
    segno.make_qr(page, error="l").terminal(out=drawn, compact=True, border=2)
    print(drawn.getvalue().rstrip())
    return EXIT_OK


async def _list() -> int:
    import time

    config, store = await _store()
    try:
        found = await store.nodes()
    finally:
        await store.close()
    if not found:
        print(t("nodes.none"))
        return EXIT_OK
    beat = config.nodes.heartbeat_seconds if config.nodes is not None else 20.0
    now = time.time()
    for record in found:
        online = now - record.last_seen <= 2 * beat + 1
        state = t("nodes.online") if online else t("nodes.offline")
        seen = _ago(now - record.last_seen)
        caps = ", ".join(record.caps) or "-"
        print(f"{record.name}  {record.platform or '?'}  {state}  {t('nodes.seen', ago=seen)}")
        print(f"  {caps}")
    return EXIT_OK


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{int(seconds)}s"
    if seconds < 5400:
        return f"{int(seconds // 60)}m"
    if seconds < 129600:
        return f"{int(seconds // 3600)}h"
    return f"{int(seconds // 86400)}d"


async def _revoke(name: str) -> int:
    from habakkuk.engine.errors import NotFound

    _, store = await _store()
    try:
        gone = await store.revoke(name)
    finally:
        await store.close()
    if not gone:
        raise NotFound.said("nodes.no_such", name=name)
    print(t("nodes.revoked", name=name))
    return EXIT_OK


async def _run(args: argparse.Namespace) -> int:
    import asyncio

    from habakkuk.engine.device_config import NODE_NAME
    from habakkuk.engine.errors import BadInput
    from habakkuk.protocols.nodes.capabilities import Capabilities, NodeOptions
    from habakkuk.protocols.nodes.client import NodeClient, pair, read_identity, write_identity

    path = current_home().root / "node.json"
    folder = args.dir.expanduser().resolve() if args.dir is not None else None
    if folder is not None and not folder.is_dir():
        raise BadInput.said("node.no_folder", path=folder)
    caps = Capabilities(NodeOptions(args.allow_run, args.allow_camera, folder))
    identity = read_identity(path)
    if args.code:
        if not args.server or not args.name:
            raise BadInput.said("node.pair_needs")
        if not NODE_NAME.match(args.name):
            raise BadInput.said("node.bad_name", name=args.name)
        identity = await pair(args.server, args.code, args.name, caps.names)
        write_identity(path, identity)
        print(t("node.paired", name=identity.name, server=identity.server, path=path))
    elif identity is None:
        raise BadInput.said("node.not_paired", path=path)
    elif (args.server and args.server.rstrip("/") != identity.server) or (
        args.name and args.name != identity.name
    ):
        raise BadInput.said(
            "node.other_identity", path=path, server=identity.server, name=identity.name
        )
    client = NodeClient(identity, caps, say=lambda line: print(line, flush=True))
    try:
        await client.run()
    except asyncio.CancelledError:
        return EXIT_OK
    return EXIT_OK  # run() returns only by raising
