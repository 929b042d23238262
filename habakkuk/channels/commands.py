"""The channel CLI commands: `habakkuk channels`, `habakkuk pair CODE`, `habakkuk send`.

They work on control directly (no workers), on the storage the config names (SQLite
files or PostgreSQL): a running `habakkuk serve` picks up the pairing and sends the
queued deliveries.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time
from pathlib import Path

from habakkuk.engine.blobs import BlobStore
from habakkuk.engine.config import Config, load_config
from habakkuk.engine.errors import ConfigError, HabakkukError
from habakkuk.engine.exit_codes import EXIT_NOT_FOUND
from habakkuk.engine.home import Home
from habakkuk.engine.i18n import t
from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.jobs import JobQueue
from habakkuk.engine.sql import Database
from habakkuk.engine.storage import open_storage

from .adapter import Address
from .health import channel_health, health_json, health_line
from .outbox import Outbox
from .store import ChannelStore


async def _open(home: Home) -> tuple[Config, Database, ChannelStore]:
    config = load_config(home)
    home.prepare()
    storage = await asyncio.to_thread(open_storage, home, config)
    db = await storage.open(CONTROL)
    try:
        return config, db, await ChannelStore.open(db)
    except BaseException:
        await db.close()
        raise


def _blobs(home: Home, control: Database) -> BlobStore:
    """The home's blobs; on PostgreSQL shared through control, so the node that sends
    the file finds it whichever machine queued it."""
    return BlobStore(home.blobs_dir, shared=control if control.dialect == "postgres" else None)


async def channels_status(home: Home, *, as_json: bool = False) -> int:
    """Print each configured channel's health (`as_json`: a JSON array of records, one
    per account); returns 0, or 1 when one is unhealthy."""
    config, db, store = await _open(home)
    try:
        statuses = await store.statuses()
        holders = await store.live_holders()
    finally:
        await db.close()
    healths = channel_health(config.channels, statuses, holders)
    if as_json:
        print(json.dumps([health_json(h) for h in healths], indent=2))
    elif not config.channels:
        print(t("cli.channels.none"))
    now = time.time()
    for health in [] if as_json else healths:
        print(
            f"{health.account:<16} {health.type:<13} {health.state:<13} {health_line(health, now)}"
        )
    return 0 if all(h.healthy for h in healths) else 1


async def pair(home: Home, code: str) -> int:
    """Approve a pairing code: its user may talk from now on and is told so."""
    config, db, store = await _open(home)
    try:
        pairing = await store.approve_pairing(code)
        if pairing is None:
            print(f"habakkuk: {t('cli.pair.unknown', code=repr(code))}", file=sys.stderr)
            return EXIT_NOT_FOUND
        await Outbox(JobQueue(db)).send_text(
            f"paired:{pairing.account}:{pairing.user}:{pairing.code}",
            pairing.address,
            t("chat.paired", language=config.language_of(pairing.account)),
        )
    finally:
        await db.close()
    who = f"{pairing.name} ({pairing.user})" if pairing.name else pairing.user
    print(t("cli.pair.paired", who=who, account=pairing.account))
    return 0


async def send(home: Home, to: str, text: str, file: str | None) -> int:
    """Queue a message (or a file with `text` as caption) to a chat; serve sends it."""
    try:
        address = Address.parse(to)
    except ValueError as exc:
        raise ConfigError(f"--to: {exc}") from None
    config, db, _ = await _open(home)
    try:
        if address.channel not in config.channels:
            known = ", ".join(sorted(config.channels)) or "none"
            raise ConfigError(
                f"--to: channel {address.channel!r} is not configured (channels: {known})"
            )
        job_id = f"send:{secrets.token_hex(8)}"
        outbox = Outbox(JobQueue(db))
        if file is not None:
            path = Path(file).expanduser()
            try:
                data = await asyncio.to_thread(path.read_bytes)
            except OSError as exc:
                raise HabakkukError(f"--file: {path}: {exc.strerror}") from None
            blob = await _blobs(home, db).put(data, path.suffix)
            await outbox.send_file(job_id, address, blob, path.name, text)
        else:
            if not text.strip():
                raise ConfigError("send: give the TEXT to send (or --file PATH)")
            await outbox.send_text(job_id, address, text)
    finally:
        await db.close()
    print(t("cli.send.queued", job=job_id, address=address))
    return 0
