"""The web chat's adapter keys each part of a delivery apart: a reply read aloud is its
text and then its voice note in one delivery job, and both reach the conversation's log,
each once however often the delivery is retried."""

from __future__ import annotations

from pathlib import Path

from habakkuk.channels.adapter import Address
from habakkuk.channels.deliveries import SENDING, VOICE_CHUNK, Sending
from habakkuk.channels.delivery_types import ReplyDelivery
from habakkuk.channels.web import FILE_ROLE, WebAdapter, chat_of, web_account
from habakkuk.server.webstore import WebStore


async def test_a_replys_text_and_its_voice_note_are_each_logged_once_across_retries(
    tmp_path: Path,
) -> None:
    web = await WebStore.open(tmp_path / "web.db")
    try:
        adapter = WebAdapter(web_account(None, "web"), web)
        to = Address("web", chat_of("c1"))
        note = tmp_path / "reply.ogg"
        note.write_bytes(b"OggS" + b"\x00" * 60)
        sending = Sending("reply:turn_1", ReplyDelivery(to, "turn_1", None, "also"), "done")
        for _ in range(2):  # the delivery, then its retry after a lost record
            token = SENDING.set(sending)
            try:
                text_seq = await adapter.send_text(to, "the answer")
                SENDING.set(Sending(sending.job, sending.delivery, "done", chunk=VOICE_CHUNK))
                note_seq = await adapter.send_voice(to, note, name="reply.ogg")
            finally:
                SENDING.reset(token)
        entries = await web.events("c1")
        assert [(e.role, e.text) for e in entries] == [("assistant", "the answer"), (FILE_ROLE, "")]
        assert [str(e.seq) for e in entries] == [text_seq, note_seq]
        assert entries[1].file is not None and entries[1].file.name == "reply.ogg"
    finally:
        await web.close()
