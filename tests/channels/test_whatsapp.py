"""The WhatsApp adapter's parts: the library boundary, parsing real neonize events, the
markup, linking by QR code (the event-boundary fake: tests/channels/fake_whatsapp.py)."""

from __future__ import annotations

import asyncio
import inspect
import stat
import textwrap
from pathlib import Path

import pytest
from neonize.aioze.client import NewAClient
from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import Message as WAMessage
from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import ReactionMessage

from habakkuk import cli
from habakkuk.channels import whatsapp_client
from habakkuk.channels.format_whatsapp import render_whatsapp, whatsapp_chunks
from habakkuk.channels.platforms import SetupCheckFailed
from habakkuk.channels.whatsapp import SETUP, check_setup
from habakkuk.channels.whatsapp_parse import Me, media_message, to_inbound
from habakkuk.channels.whatsapp_session import render_qr
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.home import Home
from tests.channels.fake_whatsapp import GROUP, ME, ME_LID, PERSON, PERSON_LID, FakeWhatsApp

ME_ = Me(ME, ME_LID)


def test_neonizes_client_has_every_method_the_adapter_calls() -> None:
    """The real NewAClient accepts each Protocol method's arguments (by name and position),
    so the in-memory client the tests use cannot drift from what runs in production."""
    protocol = whatsapp_client.WhatsAppClient
    names = [n for n, v in vars(protocol).items() if inspect.iscoroutinefunction(v)]
    assert {"connect", "send_message", "upload", "download_any", "send_chat_presence"} <= set(names)
    for name in names:
        wanted = list(inspect.signature(getattr(protocol, name)).parameters)
        real = inspect.signature(getattr(NewAClient, name)).parameters
        assert inspect.iscoroutinefunction(getattr(NewAClient, name)), name
        assert list(real)[: len(wanted)] == wanted, (name, list(real))
        extra = list(real.values())[len(wanted) :]
        assert all(p.default is not inspect.Parameter.empty for p in extra), name
    assert isinstance(vars(protocol)["event"], property)
    registry = whatsapp_client.EventRegistry
    assert callable(getattr(NewAClient(":memory:").event, "qr", None))
    assert "__call__" in vars(registry) and "qr" in vars(registry)


def test_neonize_still_sends_without_a_message_id_of_ours() -> None:
    """whatsmeow takes the caller's message id (SendRequestExtra.ID), which would make a
    chunk resent after a crash the same message; neonize's send_message passes none (the
    whatsapp module's docstring). A release that takes one fails this: derive the id from
    the delivery and its chunk then (deliveries.SENDING), as Matrix derives its txn ids."""
    taken = set(inspect.signature(NewAClient.send_message).parameters)
    assert not taken & {"extra", "id", "message_id", "msg_id", "request_extra"}, taken


def test_the_device_store_is_created_private(tmp_path: Path) -> None:
    path = tmp_path / "whatsapp-wa.db"
    client = whatsapp_client.open_client(path)
    assert isinstance(client, NewAClient)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_pairing_code_renders_as_a_terminal_qr_code() -> None:
    drawn = render_qr("2@AbCdEf123,key1,key2,key3")
    lines = drawn.splitlines()
    assert len(lines) > 10 and any(ch in drawn for ch in "▀▄█")
    # a QR code is square: as wide as twice its line count (two rows per line), give or take
    widths = {len(line) for line in lines if line.strip()}
    assert len(widths) == 1 and abs(widths.pop() - 2 * len(lines)) <= 4
    assert render_qr("2@other") != drawn


def _config(home: Home, body: str) -> None:
    home.config_path.write_text(textwrap.dedent(body))


def test_whatsapp_link_shows_the_qr_code_and_who_we_are(
    home: Home, wa: FakeWhatsApp, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(home, "channels:\n  wa:\n    type: whatsapp\n    allow_from: ['+4915123456789']\n")
    wa.link_all, wa.scan_on_qr = False, True
    assert cli.main(["whatsapp", "link"]) == 0
    out = capsys.readouterr().out
    assert "▀" in out or "▄" in out
    assert "Linked devices" in out
    assert f"linked: wa is WhatsApp +{ME}" in out
    assert str(home.channels_dir / "whatsapp-wa.db") in wa.linked


def test_whatsapp_link_names_the_accounts_to_choose_from(
    home: Home, wa: FakeWhatsApp, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(home, "channels:\n  a:\n    type: whatsapp\n  b:\n    type: whatsapp\n")
    assert cli.main(["whatsapp", "link"]) == 2
    assert "choose --account (a, b)" in capsys.readouterr().err
    assert cli.main(["whatsapp", "link", "--account", "c"]) == 2
    assert "no whatsapp channel 'c'" in capsys.readouterr().err


async def test_the_setup_check_says_who_we_are_or_that_linking_is_needed(
    home: Home, wa: FakeWhatsApp
) -> None:
    config = ChannelConfig(type="whatsapp")
    config.name = "wa"
    wa.link_all = False
    with pytest.raises(SetupCheckFailed, match="habakkuk whatsapp link --account wa"):
        await check_setup(config, {})
    shown: list[str] = []
    wa.scan_on_qr = True
    assert SETUP.link is not None
    assert await SETUP.link(config, home.channels_dir, shown.append) == f"+{ME}"
    assert any("▀" in text for text in shown)
    assert await check_setup(config, {}) == f"+{ME}"


# -- parsing the library's own events --------------------------------------------------


def test_a_private_message_becomes_an_inbound_message(wa: FakeWhatsApp) -> None:
    event = wa.event(WAMessage(conversation="hello"), name="Alice")
    msg = to_inbound("wa", ME_, event)
    assert msg is not None
    assert (msg.chat, msg.sender, msg.text) == (f"{PERSON}@s.whatsapp.net", f"+{PERSON}", "hello")
    assert msg.message_id == event.Info.ID and msg.key == f"{msg.chat}:{event.Info.ID}"
    assert msg.addressed and not msg.is_group and msg.sender_name == "Alice"
    assert PERSON in msg.sender_aliases


def test_a_sender_addressed_by_lid_is_known_by_phone_number(wa: FakeWhatsApp) -> None:
    event = wa.event(WAMessage(conversation="hi"), lid=True)
    msg = to_inbound("wa", ME_, event)
    assert msg is not None and msg.sender == f"+{PERSON}"
    assert f"{PERSON_LID}@lid" in msg.sender_aliases


def test_group_messages_are_addressed_by_mention_or_reply(wa: FakeWhatsApp) -> None:
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import ContextInfo, ExtendedTextMessage

    plain = to_inbound("wa", ME_, wa.event(WAMessage(conversation="lunch?"), chat=GROUP))
    assert plain is not None and plain.is_group and not plain.addressed

    def ext(text: str, **context: object) -> WAMessage:
        info = ContextInfo(**context)  # type: ignore[arg-type]  # protobuf keyword fields
        return WAMessage(extendedTextMessage=ExtendedTextMessage(text=text, contextInfo=info))

    mention = ext(f"@{ME} what time is it", mentionedJID=[f"{ME}@s.whatsapp.net"])
    msg = to_inbound("wa", ME_, wa.event(mention, chat=GROUP))
    assert msg is not None and msg.addressed and msg.text == "what time is it"
    by_lid = ext(f"@{ME_LID} hi", mentionedJID=[f"{ME_LID}@lid"])
    msg = to_inbound("wa", ME_, wa.event(by_lid, chat=GROUP))
    assert msg is not None and msg.addressed and msg.text == "hi"
    reply = ext("and tomorrow?", stanzaID="3EB0AA", participant=f"{ME}:3@s.whatsapp.net")
    msg = to_inbound("wa", ME_, wa.event(reply, chat=GROUP))
    assert msg is not None and msg.addressed
    other = ext("and you?", stanzaID="3EB0AB", participant=f"{PERSON}@s.whatsapp.net")
    msg = to_inbound("wa", ME_, wa.event(other, chat=GROUP))
    assert msg is not None and not msg.addressed


def test_what_is_not_a_message_to_answer_is_skipped(wa: FakeWhatsApp) -> None:
    own = wa.event(WAMessage(conversation="sent from the phone"))
    own.Info.MessageSource.IsFromMe = True
    assert to_inbound("wa", ME_, own) is None
    reaction = WAMessage(reactionMessage=ReactionMessage(text="👍"))
    assert to_inbound("wa", ME_, wa.event(reaction)) is None


async def test_media_becomes_attachments_that_survive_a_restart(wa: FakeWhatsApp) -> None:
    voice = await wa.file("voice.ogg", b"OggS voice", "audio/ogg; codecs=opus")
    photo = await wa.file("p.jpg", b"\xff\xd8 jpeg", "image/jpeg", caption="look")
    doc = await wa.file("report.pdf", b"%PDF-1.4", "application/pdf")
    [v] = to_inbound("wa", ME_, voice).attachments  # type: ignore[union-attr]  # asserted by the unpacking
    assert (v.kind, v.media_type) == ("voice", "audio/ogg")
    p_msg = to_inbound("wa", ME_, photo)
    assert p_msg is not None and p_msg.text == "look"
    [p] = p_msg.attachments
    assert p.kind == "photo" and p.size == len(b"\xff\xd8 jpeg")
    carried = media_message(p.file_id)
    assert carried.imageMessage.directPath and not carried.imageMessage.JPEGThumbnail
    [d] = to_inbound("wa", ME_, doc).attachments  # type: ignore[union-attr]  # as above
    assert (d.kind, d.name, d.media_type) == ("document", "report.pdf", "application/pdf")
    with pytest.raises(ValueError, match="not a WhatsApp media id"):
        media_message("%%%")


def test_markdown_becomes_whatsapp_markup() -> None:
    text = (
        "# Plan\n**bold** and *it* and ~~gone~~, `x*y*`\n- [docs](https://x.org)\n```\n**raw**\n```"
    )
    assert render_whatsapp(text) == (
        "*Plan*\n*bold* and _it_ and ~gone~, `x*y*`\n• docs (https://x.org)\n```\n**raw**\n```"
    )


def test_a_long_reply_is_cut_under_the_limit_reopening_code_blocks() -> None:
    text = "```\n" + "\n".join(f"line {i}" for i in range(2000)) + "\n```"
    chunks = whatsapp_chunks(text, limit=1000)
    assert len(chunks) > 5 and all(len(c) <= 1000 for c in chunks)
    assert all(c.startswith("```") and c.endswith("```") for c in chunks)
    assert whatsapp_chunks(text, limit=1000) == chunks
    assert whatsapp_chunks("") == ["…"]
    words = " ".join(["word"] * 3000)
    pieces = whatsapp_chunks(words, limit=1000)
    assert all(len(c) <= 1000 for c in pieces)
    assert " ".join(pieces).split() == words.split()  # cut between words, none lost


async def test_an_unlinked_device_is_fatal_naming_the_link_command(
    tmp_path: Path, wa: FakeWhatsApp
) -> None:
    from habakkuk.channels.adapter import FatalAdapterError
    from habakkuk.channels.whatsapp import WhatsAppAdapter

    wa.link_all = False
    config = ChannelConfig(type="whatsapp")
    config.name = "wa"
    adapter = WhatsAppAdapter(config, tmp_path / "whatsapp-wa.db", wa.open)

    async def inbox(_: object) -> None:
        raise AssertionError("nothing arrives unlinked")

    with pytest.raises(FatalAdapterError, match="not linked: run `habakkuk whatsapp link"):
        await asyncio.wait_for(adapter.run(inbox, lambda: None), 10)
    await adapter.close()
