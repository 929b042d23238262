"""Exactly-once email across a real SIGKILL of `habakkuk --serve` (a subprocess), with
Dovecot and aiosmtpd as the mail servers."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.channels.fake_email import PASSWORD, PERSON, MailDriver
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError, OSError, ValueError, KeyError)


def positioned(home: Path) -> bool:
    return bool(json.loads((home / "channels" / "email-mail.json").read_text())["uidvalidity"])


@pytest.mark.timeout(180)
async def test_a_crash_mid_send_sends_once_more_with_the_same_message_id(
    mail: MailDriver, tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    channel = textwrap.indent(mail.channel_yaml("mail"), "    ")
    (home / "config.yaml").write_text(
        "providers:\n  mock:\n    type: mock\n    script:\n      - 'echo: {input}'\n"
        "agents:\n  main:\n    model: mock/script\n    mode: full\n"
        f"channels:\n  mail:\n{channel}"
    )
    mail.smtp.hold_next = 1  # the reply's SMTP DATA hangs: the delivery is mid-send
    first = await serve_process(home, MAIL_PASSWORD=PASSWORD)
    await eventually(lambda: positioned(home), what="positioned", timeout=BOUND, ignore=NOT_YET)
    mid = await mail.mail("hello", subject="hello")
    await mail.smtp.wait_for(lambda: len(mail.smtp.attempts) == 1, timeout=BOUND)
    await kill(first)
    mail.smtp.released.set()
    assert mail.smtp.received == []

    second = await serve_process(home, MAIL_PASSWORD=PASSWORD)
    await mail.smtp.wait_for(lambda: len(mail.smtp.received) == 1, timeout=BOUND)
    turn = f"turn:mail:{PERSON}:{mid}"
    await eventually(
        lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
        what="the delivery",
        timeout=BOUND,
        ignore=NOT_YET,
    )
    await mail.mail("after the restart", subject="after the restart")
    await mail.smtp.wait_for(lambda: len(mail.smtp.received) == 2, timeout=BOUND)
    await stop(second)
    assert mail.texts() == ["echo: hello", "echo: after the restart"]
    # SMTP cannot take a message back: the resend carries the Message-ID the killed
    # attempt carried, so a mail client shows it once.
    assert mail.smtp.received[0].message_id == mail.smtp.attempts[0]
    rows = jobs(home)
    assert rows[turn]["attempts"] == 1  # the turn ran once
    assert rows[f"reply:{turn}"]["attempts"] == 2
    assert len([r for r in rows.values() if r["kind"] == "turn"]) == 2
