"""The email channel's parts: reading mail, writing replies, the thread state; and the
setup check and TLS against the real servers (Dovecot, aiosmtpd)."""

from __future__ import annotations

import asyncio
import contextlib
import stat
from dataclasses import replace
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path

import pytest

from habakkuk.channels.adapter import Address, InboundMessage
from habakkuk.channels.email import SETUP, EmailAdapter, check_setup
from habakkuk.channels.email_format import (
    Outgoing,
    build_message,
    html_to_text,
    parse,
    reply_subject,
    strip_quoted,
)
from habakkuk.channels.email_imap import ImapClient
from habakkuk.channels.email_smtp import SmtpLink
from habakkuk.channels.email_state import EmailState, thread_key
from habakkuk.channels.platforms import SetupCheckFailed
from habakkuk.engine.channel_config import ChannelConfig, TlsMode, origin_taint
from habakkuk.engine.timeouts import wait_within
from tests.channels.fake_email import PASSWORD, Dovecot, MailDriver, SmtpServer
from tests.helpers import eventually


def raw(text: str = "hi", **headers: str) -> bytes:
    message = EmailMessage()
    message["From"] = headers.pop("From", "Alice <Alice@Example.org>")
    message["To"] = "bot@example.org"
    message["Subject"] = headers.pop("Subject", "Hello")
    for key, value in headers.items():
        message[key.replace("_", "-")] = value
    message.set_content(text)
    return message.as_bytes()


def test_a_reply_is_read_without_its_quoted_tail() -> None:
    text = (
        "Sounds good, see you then.\n\n"
        "On Mon, Dec 7, 2026 at 9:14 AM Habakkuk <bot@example.org>\nwrote:\n"
        "> Shall we meet at eight?\n> \n"
    )
    assert strip_quoted(text) == "Sounds good, see you then."
    assert strip_quoted("top\n> quoted\nbottom") == "top\nbottom"
    assert strip_quoted("Thanks!\n\n-- \nAlice\nCEO") == "Thanks!"
    assert strip_quoted("ok\n-----Original Message-----\nFrom: x") == "ok"


def test_html_is_read_as_text_without_styles_or_scripts() -> None:
    markup = (
        "<html><head><style>p{}</style></head><body><script>x()</script>"
        "<p>Hello&nbsp;<b>there</b></p><ul><li>one</li><li>two</li></ul></body></html>"
    )
    assert html_to_text(markup) == "Hello there\n\n- one\n- two"


def test_a_mail_is_read_with_sender_ids_and_attachments() -> None:
    message = EmailMessage()
    message["From"] = "Alice <ALICE@example.org>"
    message["Subject"] = "Re: trip"
    message["Message-ID"] = "<m2@example.org>"
    message["In-Reply-To"] = "<m1@example.org>"
    message["References"] = "<m0@example.org> <m1@example.org>"
    message.set_content("see attached")
    message.add_attachment(b"\x89PNG", maintype="image", subtype="png", filename="a.png")
    message.add_attachment(b"OggS", maintype="audio", subtype="ogg", filename="v.ogg")
    mail = parse(message.as_bytes(), "fallback@x")
    assert (mail.message_id, mail.sender, mail.sender_name) == (
        "m2@example.org",
        "alice@example.org",
        "Alice",
    )
    assert mail.in_reply_to == "m1@example.org"
    assert mail.references == ["m0@example.org", "m1@example.org"]
    assert mail.text == "see attached"
    assert [(p.kind, p.name, p.data) for p in mail.parts] == [
        ("photo", "a.png", b"\x89PNG"),
        ("voice", "v.ogg", b"OggS"),
    ]
    assert not mail.auto


def test_a_mail_without_a_message_id_gets_the_stable_fallback() -> None:
    assert parse(raw(), "uid.7.3@example.org").message_id == "uid.7.3@example.org"


@pytest.mark.parametrize(
    "headers",
    [
        {"Auto_Submitted": "auto-replied"},
        {"Precedence": "bulk"},
        {"List_Id": "<news.example.org>"},
        {"From": "MAILER-DAEMON@example.org"},
    ],
)
def test_automatic_mail_is_told_apart(headers: dict[str, str]) -> None:
    assert parse(raw(**headers), "x@y").auto


def test_reply_subjects_say_re_once() -> None:
    assert reply_subject("trip") == "Re: trip"
    assert reply_subject("RE: Re: AW: trip") == "Re: trip"
    assert reply_subject("") == "Re:"


def test_a_reply_is_plain_and_html_inside_its_thread_with_files() -> None:
    out = Outgoing(
        sender="bot@example.org",
        to="alice@example.org",
        subject="Re: trip",
        markdown="**Yes** <script>alert(1)</script>\n\n- a\n- b",
        message_id="hk.1@example.org",
        in_reply_to="m2@example.org",
        references=("m0@example.org", "m2@example.org"),
        files=(("notes.txt", b"n"),),
    )
    message = BytesParser(policy=policy.default).parsebytes(build_message(out, 0).as_bytes())
    assert message["Message-ID"] == "<hk.1@example.org>"
    assert message["In-Reply-To"] == "<m2@example.org>"
    assert message["References"] == "<m0@example.org> <m2@example.org>"
    assert message["Auto-Submitted"] == "auto-replied"
    assert message.get_content_type() == "multipart/mixed"
    assert isinstance(message, EmailMessage)
    body = message.get_body(("html",))
    assert body is not None
    html = str(body.get_content())
    assert "<strong>Yes</strong>" in html and "<li>a</li>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html  # never passed as markup
    plain = message.get_body(("plain",))
    assert plain is not None and "**Yes**" in str(plain.get_content())
    [attachment] = list(message.iter_attachments())
    assert attachment.get_filename() == "notes.txt"


def test_the_thread_of_a_reply_is_found_by_its_parent_or_its_root() -> None:
    state = EmailState()
    first = state.thread_of("m1", "", [])
    assert first == thread_key("m1")
    state.remember("m1", first, [], "trip")
    state.remember("ours", first, ["m1"], "trip")
    assert state.thread_of("m3", "ours", ["m1", "ours"]) == first
    # A reply to a message we forgot: the root of its References.
    assert state.thread_of("m9", "gone", ["m1", "gone"]) == first
    assert state.thread_of("new", "", []) != first
    assert state.reply_headers(first, "m1") == ("m1", ["m1"])
    assert state.reply_headers(first, None) == ("ours", ["m1", "ours"])


def test_the_state_file_is_private_and_a_foreign_one_is_named(tmp_path: Path) -> None:
    path = tmp_path / "email-mail.json"
    state = EmailState(uidvalidity=5, last_uid=9)
    state.remember("m1", "tabc", [], "trip")
    state.save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = EmailState.load(path)
    assert (again.uidvalidity, again.last_uid, again.threads["tabc"].last) == (5, 9, "m1")
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"email-mail\.json: not an email state file"):
        EmailState.load(path)


def test_only_email_channels_start_sessions_tainted() -> None:
    mail = ChannelConfig(type="email")
    tg = ChannelConfig(type="telegram")
    channels = {"mail": mail, "tg": tg}
    assert origin_taint("channel:mail", channels) == "email channel mail"
    assert origin_taint("channel:tg", channels) == ""
    assert origin_taint("cli", channels) == ""


# -- the setup check and TLS against the real servers -----------------------------------


def account(
    dovecot: Dovecot, smtp: SmtpServer, bot: str, tls: TlsMode, imap_port: int
) -> ChannelConfig:
    config = ChannelConfig(
        type="email",
        imap=f"127.0.0.1:{imap_port}",
        smtp=f"127.0.0.1:{smtp.port}",
        username=bot,
        password_env="MAIL_PASSWORD",
        address=bot,
    )
    config.name = "mail"
    config.tls_mode = tls
    return config


async def test_setup_check_logs_in_to_both_servers(mail: MailDriver) -> None:
    config = account(mail.dovecot, mail.smtp, mail.bot, "plain", mail.dovecot.imap_port)
    said = await check_setup(config, {"MAIL_PASSWORD": PASSWORD})
    assert said.startswith(mail.bot) and "with IDLE" in said
    with pytest.raises(SetupCheckFailed, match=r"^IMAP 127\.0\.0\.1:\d+: login as .* refused"):
        await check_setup(config, {"MAIL_PASSWORD": "wrong"})
    assert SETUP.type == "email"


@pytest.mark.parametrize("tls", ["implicit", "starttls"])
async def test_tls_connections_verify_the_servers_certificate(
    dovecot: Dovecot, tls: TlsMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = dovecot.add_user()
    smtp = SmtpServer(bot, tls=tls, cert=dovecot.cert)
    await smtp.start()
    try:
        port = dovecot.imaps_port if tls == "implicit" else dovecot.imap_port
        config = account(dovecot, smtp, bot, tls, port)
        # Without our certificate trusted, the self-signed one is refused...
        with pytest.raises(SetupCheckFailed, match="CERTIFICATE_VERIFY_FAILED"):
            await check_setup(config, {"MAIL_PASSWORD": PASSWORD})
        # ...and trusted (as a private CA would be), both servers are reached over TLS.
        monkeypatch.setenv("SSL_CERT_FILE", str(dovecot.cert))
        said = await check_setup(config, {"MAIL_PASSWORD": PASSWORD})
        assert said.startswith(bot)
        adapter = EmailAdapter(config, PASSWORD, dovecot.root / f"state-{tls}.json")
        await adapter.send_text(Address("mail", "alice@example.org"), "over **TLS**")
        [received] = smtp.received
        assert received.text == "over **TLS**"
        assert received.message["Subject"] == "over TLS"
    finally:
        await smtp.stop()


def test_encoded_headers_and_file_names_are_read_decoded() -> None:
    message = EmailMessage()
    message["From"] = "Jürgen Groß <jurgen@example.de>"
    message["Subject"] = "Grüße aus München"
    message.set_content("Hallo")
    message.add_attachment(b"x", maintype="application", subtype="pdf", filename="Bücher.pdf")
    mail = parse(message.as_bytes(), "x@y")
    assert (mail.sender_name, mail.subject) == ("Jürgen Groß", "Grüße aus München")
    assert [p.name for p in mail.parts] == ["Bücher.pdf"]
    out = Outgoing("bot@example.org", "jurgen@example.de", "Re: Grüße", "Tschüss", "hk.2@x")
    again = BytesParser(policy=policy.default).parsebytes(build_message(out, 0).as_bytes())
    assert again["Subject"] == "Re: Grüße"


async def test_without_idle_the_mailbox_is_polled() -> None:
    # A Dovecot that does not offer IDLE: the adapter checks every poll_timeout seconds.
    server = Dovecot(extra_config="imap_capability = IMAP4rev1 LITERAL+ UIDPLUS")
    await asyncio.to_thread(server.start)
    try:
        bot = server.add_user()
        assert "IDLE" not in await asyncio.to_thread(server.capabilities, bot)
        config = ChannelConfig(
            type="email",
            imap=f"127.0.0.1:{server.imap_port}",
            smtp="127.0.0.1:25",
            username=bot,
            password_env="MAIL_PASSWORD",
            address=bot,
            poll_timeout=1,
        )
        config.name = "mail"
        config.tls_mode = "plain"
        adapter = EmailAdapter(config, PASSWORD, server.root / "state.json")
        got: list[InboundMessage] = []
        arrived = asyncio.Event()
        beats: list[float] = []

        async def inbox(message: InboundMessage) -> None:
            got.append(message)
            arrived.set()

        run = asyncio.create_task(adapter.run(inbox, lambda: beats.append(0.0)))
        await eventually(lambda: adapter.state.uidvalidity != 0, what="positioned")
        mail = EmailMessage()
        mail["From"] = "alice@example.org"
        mail["Subject"] = "polled"
        mail["Message-ID"] = "<polled@example.org>"
        mail.set_content("found by a poll")
        await asyncio.to_thread(server.append, bot, mail.as_bytes())
        await wait_within(arrived.wait(), 20)
        count = len(beats)
        await eventually(lambda: len(beats) > count, what="a beat on a poll with nothing new")
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
        await adapter.close()
        [message] = got
        assert (message.message_id, message.text) == (
            "polled@example.org",
            "polled\n\nfound by a poll",
        )
    finally:
        await asyncio.to_thread(server.stop)


def _mail(subject: str) -> bytes:
    message = EmailMessage()
    message["From"] = "alice@example.org"
    message["Subject"] = subject
    message["Message-ID"] = f"<{subject}@example.org>"
    message.set_content(subject)
    return message.as_bytes()


async def test_a_recreated_mailbox_is_taken_from_its_current_end(
    dovecot: Dovecot, tmp_path: Path
) -> None:
    bot = dovecot.add_user()
    await asyncio.to_thread(dovecot.append, bot, _mail("before"))
    # Saved for another INBOX (another UIDVALIDITY) at its very start.
    state = tmp_path / "state.json"
    EmailState(uidvalidity=12345, last_uid=0).save(state)
    config = ChannelConfig(
        type="email",
        imap=f"127.0.0.1:{dovecot.imap_port}",
        smtp="127.0.0.1:25",
        username=bot,
        password_env="MAIL_PASSWORD",
        address=bot,
    )
    config.name = "mail"
    config.tls_mode = "plain"
    adapter = EmailAdapter(config, PASSWORD, state)
    got: list[str] = []

    async def inbox(message: InboundMessage) -> None:
        got.append(message.message_id)

    run = asyncio.create_task(adapter.run(inbox, lambda: None))
    try:
        await eventually(lambda: adapter.state.uidvalidity != 12345, what="repositioned")
        await asyncio.to_thread(dovecot.append, bot, _mail("after"))
        await eventually(
            lambda: EmailState.load(state).last_uid == 2, what="the new mail handed over"
        )
    finally:
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
        await adapter.close()
    assert got == ["after@example.org"]  # the mail already there was not answered


async def test_fetching_takes_batches_and_never_the_newest_again(dovecot: Dovecot) -> None:
    bot = dovecot.add_user()
    for subject in ("one", "two", "three"):
        await asyncio.to_thread(dovecot.append, bot, _mail(subject))
    client = ImapClient("127.0.0.1", dovecot.imap_port, "plain")
    await client.connect()
    try:
        await client.login(bot, PASSWORD)
        box = await client.select("INBOX")
        assert box.uidnext == 4
        first = await client.fetch_from(1, limit=2)
        assert [f.uid for f in first] == [1, 2]
        assert b"Subject: one" in first[0].body
        assert [f.uid for f in await client.fetch_from(3)] == [3]
        assert await client.fetch_from(4) == []  # `4:*` names UID 3 too: not taken
    finally:
        await client.logout()


def test_an_overlong_message_id_is_kept_as_its_digest() -> None:
    long_id = "x" * 400 + "@example.org"
    mail = parse(raw(Message_ID=f"<{long_id}>", In_Reply_To=f"<{long_id}>"), "f@x")
    assert mail.message_id.startswith("h.") and len(mail.message_id) == 34
    assert mail.in_reply_to == mail.message_id  # the same id always gives the same digest


async def test_replies_share_a_connection_and_survive_the_server_dropping_it(
    dovecot: Dovecot,
) -> None:
    bot = dovecot.add_user()
    smtp = SmtpServer(bot, idle=0.3)  # drops a connection silent for 0.3 s
    await smtp.start()
    link = SmtpLink("127.0.0.1", smtp.port, "plain", bot, PASSWORD)
    try:
        out = Outgoing(bot, "alice@example.org", "hi", "one", "hk.a@example.org")
        await link.send(build_message(out, 0))
        await link.send(build_message(replace(out, markdown="two"), 0))
        assert link.connected and smtp.connections == 1  # the second went on the first's
        await eventually(lambda: not link.connected, what="the server to drop the connection")
        await link.send(build_message(replace(out, markdown="three"), 0))
        assert [r.text for r in smtp.received] == ["one", "two", "three"]
        assert smtp.connections == 2
    finally:
        await link.close()
        await smtp.stop()
