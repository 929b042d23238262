"""The speech synthesizer against fakes of the providers' real APIs (tests/fakes/
tts_apis.py) and espeak-ng for real: what is asked of each, the audio as the format
asked for (a voice note is Ogg Opus, the local loop's WAV is 16-bit PCM with its real
sizes), its length, and one-line errors that never carry the key."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.engine.tts_config import TtsConfig, TtsProvider, resolve_tts
from habakkuk.voice import audio
from habakkuk.voice.speech import SpeechError, SpeechSynthesizer, build_synthesizer, suffix_of
from tests.fakes.tts_apis import KEY, FakeTts

SECRETS = {"TTS_KEY": KEY}


def synthesizer(
    provider: TtsProvider, *, base_url: str = "", key_env: str = "", voice: str = ""
) -> SpeechSynthesizer:
    config = TtsConfig(provider, voice=voice, key_env=key_env, base_url=base_url)
    resolve_tts(config, Path("config.yaml"))
    return build_synthesizer(config, SECRETS)


@pytest.fixture
async def fake() -> AsyncIterator[FakeTts]:
    async with FakeTts() as server:
        yield server


def wav_sizes(data: bytes) -> tuple[int, int]:
    found = audio.wav_chunks(data)
    assert found is not None
    _, body, _ = found
    return struct.unpack_from("<I", data, 4)[0], struct.unpack_from("<I", data, body - 4)[0]


async def test_openai_is_asked_for_opus_and_its_voice_note_kept_as_it_came(fake: FakeTts) -> None:
    speech = synthesizer("openai", base_url=f"{fake.url}/v1", key_env="TTS_KEY")
    spoken = await speech.synthesize("Hello & welcome.", "nova")
    [seen] = fake.seen
    assert seen.path == "/v1/audio/speech"
    assert seen.headers["Authorization"] == f"Bearer {KEY}"
    assert seen.body == {
        "model": "gpt-4o-mini-tts",
        "input": "Hello & welcome.",
        "voice": "nova",
        "response_format": "opus",
    }
    assert spoken.mime == "audio/ogg" and audio.is_ogg_opus(spoken.data)
    assert spoken.duration_s == 2.0  # the last granule position less the pre-skip


async def test_openai_wav_for_the_local_loop_gets_its_real_sizes(fake: FakeTts) -> None:
    speech = synthesizer("openai", base_url=f"{fake.url}/v1", key_env="TTS_KEY")
    spoken = await speech.synthesize("Hello.", format="wav")
    assert fake.seen[0].body["response_format"] == "wav"
    assert spoken.mime == "audio/wav" and spoken.duration_s == 1.0
    assert wav_sizes(spoken.data) == (len(spoken.data) - 8, 48000)


async def test_a_refused_key_is_one_line_without_the_key(fake: FakeTts) -> None:
    speech = build_synthesizer(
        _resolved(TtsConfig("openai", base_url=f"{fake.url}/v1", key_env="TTS_KEY")),
        {"TTS_KEY": "sk-wrong-key"},
    )
    with pytest.raises(SpeechError) as caught:
        await speech.synthesize("Hello.")
    assert str(caught.value) == "openai: HTTP 401: Incorrect API key provided"


async def test_a_missing_key_names_its_variable_and_sends_nothing(fake: FakeTts) -> None:
    speech = build_synthesizer(
        _resolved(TtsConfig("elevenlabs", base_url=fake.url, key_env="NOT_SET_HERE")), {}
    )
    with pytest.raises(SpeechError, match="the API key variable NOT_SET_HERE is not set"):
        await speech.synthesize("Hello.")
    assert fake.seen == []


def _resolved(config: TtsConfig) -> TtsConfig:
    resolve_tts(config, Path("config.yaml"))
    return config


async def test_elevenlabs_is_asked_for_opus_with_its_key_header(fake: FakeTts) -> None:
    speech = synthesizer("elevenlabs", base_url=fake.url, key_env="TTS_KEY")
    spoken = await speech.synthesize("Hi there.", "voice-123")
    [seen] = fake.seen
    assert seen.path == "/v1/text-to-speech/voice-123"
    assert seen.query == {"output_format": "opus_48000_64"}
    assert seen.headers["xi-api-key"] == KEY
    assert seen.body == {"text": "Hi there.", "model_id": "eleven_multilingual_v2"}
    assert (spoken.mime, spoken.duration_s) == ("audio/ogg", 1.5)


async def test_elevenlabs_pcm_becomes_wav(fake: FakeTts) -> None:
    speech = synthesizer("elevenlabs", base_url=fake.url, key_env="TTS_KEY")
    spoken = await speech.synthesize("Hi there.", format="wav")
    assert fake.seen[0].query == {"output_format": "pcm_24000"}
    assert (spoken.mime, spoken.duration_s) == ("audio/wav", 1.0)
    assert spoken.data[44:] == b"\x00\x02" * 24000


async def espeak_wav(text: str) -> bytes:
    process = await asyncio.create_subprocess_exec(
        "espeak-ng", "--stdout", text, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    return out


async def mp3_of(wav: bytes) -> bytes:
    process = await asyncio.create_subprocess_exec(
        "ffmpeg", "-loglevel", "error", "-i", "pipe:0", "-f", "mp3", "pipe:1",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await process.communicate(wav)
    assert out
    return out


async def test_edge_recomputes_its_token_from_the_servers_date_after_a_403(fake: FakeTts) -> None:
    fake.edge_audio = await mp3_of(await espeak_wav("Good morning."))
    fake.skew = 3600.0  # the service's clock is an hour ahead of this machine's
    speech = synthesizer("edge", base_url=fake.edge_url)
    spoken = await speech.synthesize("Fish & chips <now>.")
    # refused with the token of this machine's clock, let in with the service's (the
    # fake checks it against its own computation)
    first, second = fake.seen
    assert first.query["Sec-MS-GEC"] != second.query["Sec-MS-GEC"]
    config, ssml = fake.frames
    assert "Path:speech.config" in config and "audio-24khz-48kbitrate-mono-mp3" in config
    assert "Path:ssml" in ssml
    assert "Microsoft Server Speech Text to Speech Voice (en-US, EmmaMultilingualNeural)" in ssml
    assert "Fish &amp; chips &lt;now&gt;." in ssml
    # MP3 from the service, a voice note (Ogg Opus by ffmpeg) for the chat
    assert spoken.mime == "audio/ogg" and audio.is_ogg_opus(spoken.data)
    assert spoken.duration_s is not None and 0.5 < spoken.duration_s < 3.0
    # the skew is kept: the next request needs no second try
    await speech.synthesize("Again.")
    assert len(fake.seen) == 3


async def test_edge_audio_goes_as_mp3_when_ffmpeg_is_missing(
    fake: FakeTts, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.edge_audio = b"\xff\xfb\x90\x00" + b"\x00" * 900  # an MP3 frame's header, then data
    monkeypatch.setattr(audio, "ffmpeg", lambda: None)
    speech = synthesizer("edge", base_url=fake.edge_url)
    spoken = await speech.synthesize("Hello.")
    assert (spoken.mime, spoken.data, spoken.duration_s) == ("audio/mpeg", fake.edge_audio, None)
    with pytest.raises(SpeechError, match="WAV needs ffmpeg"):
        await speech.synthesize("Hello.", format="wav")


async def test_edge_refused_twice_is_one_line(fake: FakeTts) -> None:
    fake.refuse_every_token = True
    speech = synthesizer("edge", base_url=fake.edge_url)
    with pytest.raises(SpeechError) as caught:
        await speech.synthesize("Hello.")
    assert "HTTP 403 (after setting the token from its clock)" in str(caught.value)
    assert len(fake.seen) == 2


async def test_espeak_speaks_offline_as_wav_and_as_a_voice_note() -> None:
    speech = synthesizer("espeak")
    wav = await speech.synthesize("The board is clear today.", format="wav")
    note = await speech.synthesize("The board is clear today.")
    assert wav.mime == "audio/wav" and wav_sizes(wav.data)[0] == len(wav.data) - 8
    assert wav.duration_s is not None and wav.duration_s > 1.0
    assert note.mime == "audio/ogg" and audio.is_ogg_opus(note.data)
    assert note.duration_s == pytest.approx(wav.duration_s, abs=0.1)


async def test_espeak_without_ffmpeg_sends_its_wav(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audio, "ffmpeg", lambda: None)
    spoken = await synthesizer("espeak", voice="de").synthesize("Guten Morgen.")
    assert spoken.mime == "audio/wav" and suffix_of(spoken.mime) == ".wav"


@pytest.mark.parametrize("voice", ["--help", "a<b", ""])
async def test_a_voice_that_is_not_a_name_is_refused(voice: str) -> None:
    with pytest.raises(SpeechError):
        await synthesizer("espeak").synthesize("Hello.", voice or "x" * 200)


def test_edge_voices_are_named_as_the_service_names_them() -> None:
    from habakkuk.voice.edge import voice_name

    long = "Microsoft Server Speech Text to Speech Voice (en-US, AriaNeural)"
    assert voice_name("en-US-AriaNeural") == long
    assert voice_name(long) == long
    assert voice_name("zh-CN-liaoning-XiaobeiNeural") == (
        "Microsoft Server Speech Text to Speech Voice (zh-CN-liaoning, XiaobeiNeural)"
    )
