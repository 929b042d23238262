"""Voice replies (spec 000 "Media": Voice replies): a channel account's `voice_replies`
decided when a message comes in, and the reply spoken when it is delivered.

The gateway decides per message (`voice_for`): off, mirror (when the message carried a
voice note or audio) or always, and with `voice_text: false` the voice note instead of
the text. The decision travels in the turn's reply address (ReplyTo.voice), so a reply
queued after a restart, or by the reply sweep, is spoken the same. The delivery worker
sends the text, then speaks a Markdown-stripped copy (cut at a sentence to
tts.max_chars) as a voice note in the same delivery (so on the same serial key, in order);
when speaking fails the text alone goes, at once, never retried into silence.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.agent.requests import VoiceReply
from habakkuk.engine.blobs import BlobStore
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.tts_config import TtsConfig
from habakkuk.voice.speech import (
    Secrets,
    SpeechError,
    SpeechSynthesizer,
    build_synthesizer,
    suffix_of,
)
from habakkuk.voice.spoken_text import reply_speech

from .adapter import InboundMessage

log = logging.getLogger(__name__)


def voice_for(config: ChannelConfig, msg: InboundMessage, tts: TtsConfig | None) -> VoiceReply:
    """How the reply to `msg` is spoken by the channel's settings ("" for not at all)."""
    if tts is None or config.voice_replies == "off":
        return ""
    if config.voice_replies == "mirror" and not any(
        a.kind in ("voice", "audio") for a in msg.attachments
    ):
        return ""
    return "also" if config.voice_text else "only"


@dataclass(frozen=True)
class SpokenReply:
    """A reply spoken and stored: the voice note's file, its name and length."""

    path: Path
    name: str
    duration: float | None


class ReplySpeaker:
    """Speaks reply text with the `tts:` provider into the blob store."""

    def __init__(
        self,
        tts: TtsConfig,
        secrets: Secrets,
        blobs: BlobStore,
        synthesizer: SpeechSynthesizer | None = None,
    ) -> None:
        self.tts = tts
        self.blobs = blobs
        self.synthesizer = synthesizer or build_synthesizer(tts, secrets)

    async def speak(self, markdown: str) -> SpokenReply | None:
        """The reply as a voice note; None (logged) when it cannot be spoken."""
        text = reply_speech(markdown, self.tts.max_chars)
        if not text:
            return None
        try:
            spoken = await self.synthesizer.synthesize(text)
        except SpeechError as exc:
            log.warning("could not speak a reply: %s", exc)
            return None
        except Exception:  # a provider bug must not keep the text from the user
            log.exception("could not speak a reply")
            return None
        suffix = suffix_of(spoken.mime)
        path = await self.blobs.put(spoken.data, suffix)
        return SpokenReply(path, f"reply{suffix}", spoken.duration_s)
