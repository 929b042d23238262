"""Voice replies per channel account (spec 000 "Media": Voice replies) through the
platform fakes: `voice_replies: mirror` answers a voice note with the text and then a
voice note (Telegram sendVoice with its length), and a typed message with text alone;
`voice_text: false` sends the voice note instead of the text; a provider that fails
leaves the text, at once. Matrix gets an m.audio with info.duration, marked as a voice
message. Speech is espeak-ng's, for real (offline), made Ogg Opus by ffmpeg.
"""

from __future__ import annotations

import socket
import textwrap
from typing import Any

import pytest

from habakkuk.channels.deliveries import VOICE_CHUNK
from habakkuk.runtime import Runtime
from tests.channels.fake_matrix import FakeMatrix, MatrixDriver
from tests.channels.fake_telegram import FakeTelegram
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

ESPEAK = "tts:\n  provider: espeak\n"


def telegram(tg: FakeTelegram, extra: str) -> str:
    return textwrap.dedent(
        f"""
        channels:
          tg:
            type: telegram
            token_env: TG_TOKEN
            base_url: {tg.base_url}
            allow_from: ["42"]
            poll_timeout: 1
        """
    ) + textwrap.indent(extra, "    ")


async def started(runtime_factory: Any, config: str, account: str) -> Runtime:
    runtime: Runtime = await runtime_factory(config)
    runtime.start_workers()
    assert runtime.channels is not None
    await runtime.channels.started()
    up = await runtime.channels.supervisor.wait_adapter(account, timeout=PROCESS_BOUND)
    assert up is not None, f"the {account} adapter did not connect"
    return runtime


async def settled(runtime: Runtime) -> None:
    """Wait until no turn or delivery is queued or running."""

    async def idle() -> bool:
        depth = await runtime.turns.queue_depth()
        return not any(
            n
            for (kind, status), n in depth.items()
            if status in ("queued", "running") and (kind == "turn" or kind.startswith("delivery:"))
        )

    await eventually(idle, what="every turn and delivery to finish")


def voice_note(tg: FakeTelegram, file_id: str) -> dict[str, Any]:
    tg.add_file(file_id, b"OggS a voice note", f"voice/{file_id}.oga")
    return {"file_id": file_id, "file_unique_id": file_id, "duration": 2, "mime_type": "audio/ogg"}


async def test_a_voice_note_is_answered_with_text_then_a_voice_note_and_text_with_text(
    runtime_factory: Any, tg: FakeTelegram
) -> None:
    config = mock_config("- 'echo: {input}'", extra=telegram(tg, "voice_replies: mirror\n"))
    runtime = await started(runtime_factory, config + ESPEAK, "tg")
    tg.message(voice=voice_note(tg, "V1"))
    await tg.wait_for(lambda: bool(tg.of("sendVoice")))
    [voice] = tg.of("sendVoice")
    methods = [c.method for c in tg.calls if c.method in ("sendMessage", "sendVoice")]
    assert methods == ["sendMessage", "sendVoice"]  # the text first, then the voice note
    assert int(voice.params["duration"]) >= 1
    [(_, name, data)] = tg.sent_files
    assert name.endswith(".ogg") and data[:4] == b"OggS" and b"OpusHead" in data[:200]
    tg.message("and in writing?")
    await tg.wait_for(lambda: any("and in writing?" in t for t in tg.texts()))
    await settled(runtime)
    assert len(tg.of("sendVoice")) == 1  # a typed message is answered in writing only


async def test_voice_text_false_sends_the_voice_note_instead_of_the_text(
    runtime_factory: Any, tg: FakeTelegram
) -> None:
    channel = telegram(tg, "voice_replies: always\nvoice_text: false\n")
    runtime = await started(
        runtime_factory, mock_config("- 'the answer'", extra=channel) + ESPEAK, "tg"
    )
    tg.message("tell me")
    await tg.wait_for(lambda: bool(tg.of("sendVoice")))
    await settled(runtime)
    assert tg.texts() == []
    # Its send was noted as started before it went (Telegram cannot drop a resend itself),
    # like a file's: a crash mid-send leaves that trace for the retry.
    rows = await runtime.queue.db.fetchall("SELECT idx FROM delivery_attempts")
    assert [int(r["idx"]) for r in rows] == [VOICE_CHUNK]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_when_speaking_fails_the_text_goes_alone_at_once(
    runtime_factory: Any, tg: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TTS_KEY", "sk-test")
    broken = (
        f"tts:\n  provider: openai\n  base_url: http://127.0.0.1:{closed_port()}/v1\n"
        "  key_env: TTS_KEY\n"
    )
    channel = telegram(tg, "voice_replies: always\nvoice_text: false\n")
    runtime = await started(
        runtime_factory, mock_config("- 'the answer'", extra=channel) + broken, "tg"
    )
    tg.message("tell me")
    await tg.wait_for(lambda: tg.texts() == ["the answer"])
    await settled(runtime)
    assert tg.of("sendVoice") == []
    rows = await runtime.queue.db.fetchall(
        "SELECT status, attempts FROM jobs WHERE kind LIKE 'delivery:%'"
    )
    assert [(r["status"], r["attempts"]) for r in rows] == [("done", 1)]  # never retried


async def test_matrix_gets_an_audio_message_with_its_length_marked_as_voice(
    runtime_factory: Any, hs: FakeMatrix, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = MatrixDriver(hs)
    for name, value in driver.env().items():
        monkeypatch.setenv(name, value)
    entry = textwrap.indent(driver.channel_yaml("mx") + "voice_replies: always\n", "    ")
    config = mock_config("- 'the answer'", extra=f"channels:\n  mx:\n{entry}") + ESPEAK
    runtime = await started(runtime_factory, config, "mx")
    await driver.say("tell me")
    await eventually(lambda: len(hs.sent(driver.room)) == 2, what="the text and the voice note")
    await settled(runtime)
    text, voice = (event["content"] for event in hs.sent(driver.room))
    assert text["body"] == "the answer"
    assert voice["msgtype"] == "m.audio" and voice["info"]["mimetype"] == "audio/ogg"
    assert voice["info"]["duration"] > 0 and "org.matrix.msc3245.voice" in voice
