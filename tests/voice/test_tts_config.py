"""`tts:` and the channels' voice settings in config.yaml: defaults per provider, and
every mistake one line naming the file, the line and the key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from habakkuk.engine.config import Config, parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home

AGENT = "providers:\n  d: {type: mock}\nagents:\n  main:\n    model: d/x\n"
TELEGRAM = "channels:\n  tg:\n    type: telegram\n    token_env: TG\n"


def parse(tmp_path: Path, extra: str) -> Config:
    text = AGENT + textwrap.dedent(extra)
    return parse_config(text, tmp_path / "config.yaml", Home(tmp_path))


@pytest.mark.parametrize(
    ("provider", "model", "voice", "key_env", "base_url"),
    [
        ("openai", "gpt-4o-mini-tts", "alloy", "OPENAI_API_KEY", "https://api.openai.com/v1"),
        (
            "elevenlabs",
            "eleven_multilingual_v2",
            "21m00Tcm4TlvDq8ikWAM",
            "ELEVENLABS_API_KEY",
            "https://api.elevenlabs.io",
        ),
        (
            "edge",
            "",
            "en-US-EmmaMultilingualNeural",
            "",
            "wss://speech.platform.bing.com/consumer/speech/synthesize/readaloud/edge/v1",
        ),
        ("espeak", "", "en", "", ""),
    ],
)
def test_each_provider_fills_in_its_defaults(
    tmp_path: Path, provider: str, model: str, voice: str, key_env: str, base_url: str
) -> None:
    tts = parse(tmp_path, f"tts: {{provider: {provider}}}\n").tts
    assert tts is not None
    assert (tts.model, tts.voice, tts.key_env, tts.base_url) == (model, voice, key_env, base_url)
    assert tts.max_chars == 2000


def test_channel_voice_settings_default_to_text_only(tmp_path: Path) -> None:
    config = parse(tmp_path, TELEGRAM)
    assert (config.channels["tg"].voice_replies, config.channels["tg"].voice_text) == ("off", True)
    assert config.tts is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("tts: {provider: polly}", ":7: tts.provider: must be one of openai, elevenlabs, edge"),
        ("tts:\n  provider: edge\n  key_env: EDGE_KEY", ":9: tts.key_env: the edge provider"),
        ("tts:\n  provider: espeak\n  base_url: http://x", ":9: tts.base_url: espeak runs on"),
        ("tts:\n  provider: openai\n  base_url: ftp://x", ":9: tts.base_url: 'ftp://x' is not"),
        ("tts:\n  provider: edge\n  base_url: https://x", ":9: tts.base_url: 'https://x' is not"),
        ("tts:\n  provider: openai\n  key_env: 'my key'", ":9: tts.key_env: 'my key' is not"),
        ("tts:\n  provider: openai\n  voice: '<x>'", ":9: tts.voice: '<x>' is not a voice"),
        ("tts:\n  provider: openai\n  max_chars: 0", ":9: tts.max_chars: must be between 1"),
        (
            TELEGRAM + "    voice_replies: mirror\n",
            ":11: channels.tg.voice_replies: mirror needs a tts: section",
        ),
        (
            TELEGRAM + "    voice_replies: loud\n",
            ":11: channels.tg.voice_replies: must be one of off, mirror, always",
        ),
    ],
)
def test_a_mistake_is_one_line_naming_its_line_and_key(
    tmp_path: Path, extra: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(tmp_path, "\n" + extra + "\n")
    assert message in str(caught.value) and "\n" not in str(caught.value)


async def test_the_local_loop_gets_the_configured_synthesizer_or_none(tmp_path: Path) -> None:
    from habakkuk.voice.speech import synthesizer_for

    assert synthesizer_for(parse(tmp_path, ""), {}) is None
    speech = synthesizer_for(parse(tmp_path, "tts: {provider: espeak}\n"), {})
    assert speech is not None
    spoken = await speech.synthesize("Hello.", format="wav")
    assert spoken.mime == "audio/wav"
