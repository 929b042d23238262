"""The chat's push-to-talk key (F4): speech played into a PulseAudio microphone is heard
through the same capture and detector as `habakkuk talk`, transcribed by a fake endpoint
and sent as the message; F4 again stops listening; no microphone is one note."""

from __future__ import annotations

import asyncio

import pytest

from habakkuk.voice.wav import read_wav
from habakkuk.widgets.user_message import UserMessage
from tests.helpers import eventually
from tests.tui.conftest import ChatApp, Running, notices
from tests.voice.pulse import pulse_server, speech_wav
from tests.voice.transcriber import transcriber

QUIET = "talk:\n  silence: 500ms\n"


async def listening(ui: Running) -> None:
    await eventually(
        lambda: any(n.startswith("Listening") for n in notices(ui.app)), what="the microphone"
    )


async def test_what_is_said_after_f4_is_sent_as_the_message(
    chat_app: ChatApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pulse_server(monkeypatch) as pulse:
        question = speech_wav("what is on my board?", pulse.folder, "question")
        async with (
            transcriber(["What's on my board?"]) as fake,
            chat_app('- text: "Three cards."', extra=fake.config() + QUIET) as ui,
        ):
            await ui.press("f4")
            await listening(ui)
            await asyncio.to_thread(pulse.play_into_room, question)
            assert await ui.turn_finished() == "done"
            assert [u.text for u in ui.screen.query(UserMessage)] == ["What's on my board?"]
        (upload,) = fake.uploads
        assert read_wav(upload).seconds > read_wav(question.read_bytes()).seconds


async def test_f4_again_stops_listening_and_sends_nothing(
    chat_app: ChatApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pulse_server(monkeypatch):
        async with (
            transcriber(["unused"]) as fake,
            chat_app("", extra=fake.config() + QUIET) as ui,
        ):
            await ui.press("f4")
            await listening(ui)
            await ui.press("f4")
            await eventually(lambda: "Stopped listening." in notices(ui.app), what="the stop")
            assert list(ui.screen.query(UserMessage)) == [] and fake.uploads == []


async def test_f4_without_the_microphone_named_says_so_in_one_note(
    chat_app: ChatApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pulse_server(monkeypatch):
        async with (
            transcriber([]) as fake,
            chat_app("", extra=fake.config() + "talk:\n  device: 99\n") as ui,
        ):
            await ui.press("f4")
            await eventually(
                lambda: any("no input device 99" in n for n in notices(ui.app)),
                what="the note",
            )
            (note,) = [n for n in notices(ui.app) if "input device" in n]
            assert "apt install libportaudio2 libasound2-plugins" in note
            assert "\n" not in note
