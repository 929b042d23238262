"""The email channel's fixtures: one Dovecot per test session, an SMTP server and a fresh
mailbox per test (registered in tests/conftest.py's pytest_plugins)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.channels.fake_email import DOVECOT, PASSWORD, Dovecot, MailDriver, SmtpServer
from tests.channels.platform_driver import PlatformDriver


@pytest.fixture(scope="session")
def dovecot() -> Iterator[Dovecot]:
    """Debian's Dovecot with its own config on 127.0.0.1 (.ci/run installs it)."""
    if not os.path.exists(DOVECOT):
        pytest.skip("dovecot is not installed (apt-get install dovecot-imapd)")
    server = Dovecot()
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def mail(dovecot: Dovecot, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[MailDriver]:
    """A fresh bot mailbox on Dovecot, an SMTP server for its replies, and the person
    writing to it; $MAIL_PASSWORD is the mailbox's password."""
    monkeypatch.setenv("MAIL_PASSWORD", PASSWORD)
    bot = dovecot.add_user()
    smtp = SmtpServer(bot)
    await smtp.start()
    try:
        yield MailDriver(dovecot, smtp, bot)
    finally:
        await smtp.stop()


@pytest.fixture
def email_driver(mail: MailDriver) -> PlatformDriver:
    """The email driver of the one-table test (tests/channels/test_every_platform.py)."""
    return mail
