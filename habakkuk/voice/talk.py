"""The local voice loop: listen, transcribe, ask the session, say the reply.

Two tasks share the loop. The listener feeds every microphone frame to the energy
detector, stops the reply playing when speech starts (barge-in) and queues each
utterance. The responder transcribes an utterance, decides whether it is a request (the
wake phrases, the follow-up window), asks it as a turn of the session, prints the reply
and speaks it. The listener never waits on the responder, so barge-in is heard while
a turn runs and while a reply plays.

Everything it needs comes in as an interface (the microphone's frames, a Speaker, a
transcriber, the turns service, a SpeechSynthesizer), so the benchmark and the tests
drive the same loop with fakes or with PulseAudio.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from habakkuk.engine.errors import first_line

from .detector import DetectorSettings, EnergyDetector, Frame, SpeechStarted, Utterance
from .spoken_text import reply_speech
from .transcription import TranscriptionError
from .wake import WakeGate
from .wav import read_wav, to_wav

if TYPE_CHECKING:
    from habakkuk.engine.agent.turn_access import TurnsAccess

    from .audio_io import Speaker
    from .speech_types import SpeechSynthesizer
    from .wav import Pcm


class FrameSource(Protocol):
    """Where frames come from (audio_io.Microphone)."""

    async def frame(self) -> Frame:
        """The next 20 ms frame."""
        ...


Transcriber = Callable[[bytes], Awaitable[str]]  # WAV bytes -> text (TranscriptionError)


@dataclass(frozen=True)
class TalkSettings:
    """What `talk:` and the command line set."""

    detector: DetectorSettings = field(default_factory=DetectorSettings)
    wake: tuple[str, ...] = ()
    follow_up_s: float = 30.0
    barge_in: bool = True
    max_chars: int = 2000  # tts.max_chars
    voice: str | None = None


@dataclass
class Timings:
    """When things happened (monotonic seconds), for the benchmark and the log."""

    utterance_at: float = 0.0  # the detector ended the last utterance
    reply_audio_at: float = 0.0  # the last reply started playing
    barge_at: float = 0.0  # speech started while a reply played
    stopped_at: float = 0.0  # that reply's playback returned


class TalkLoop:
    """One voice conversation with a session; `run()` until cancelled."""

    def __init__(
        self,
        *,
        microphone: FrameSource,
        speaker: Speaker,
        transcribe: Transcriber,
        turns: TurnsAccess,
        session_id: str,
        synthesizer: SpeechSynthesizer | None,
        settings: TalkSettings,
        tone: Pcm | None = None,
        say: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.microphone = microphone
        self.speaker = speaker
        self.transcribe = transcribe
        self.turns = turns
        self.session_id = session_id
        self.synthesizer = synthesizer
        self.settings = settings
        self.tone = tone
        self.say = say
        self.clock = clock
        self.detector = EnergyDetector(settings.detector)
        self.gate = WakeGate(settings.wake, settings.follow_up_s)
        self.timings = Timings()
        self.replies = 0  # replies finished (played, stopped or only printed)
        self._utterances: asyncio.Queue[Utterance] = asyncio.Queue()
        self._playing = False

    async def run(self) -> None:
        """Listen and respond until cancelled."""
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self.listen())
            tasks.create_task(self.respond())

    async def listen(self) -> None:
        """Feed the detector; barge in on speech while playing; queue utterances."""
        while True:
            frame = await self.microphone.frame()
            if self._playing and not self.settings.barge_in:
                continue  # no barge-in: what the microphone hears of the reply is dropped
            self.detector.playing = self._playing
            for event in self.detector.feed(frame):
                if isinstance(event, SpeechStarted) and self._playing:
                    self.timings.barge_at = self.clock()
                    self.speaker.stop()
                elif isinstance(event, Utterance):
                    self.timings.utterance_at = self.clock()
                    self._utterances.put_nowait(event)

    async def respond(self) -> None:
        """Take each utterance in turn to its end (transcribed, asked, said)."""
        while True:
            utterance = await self._utterances.get()
            await self.handle(utterance)

    async def handle(self, utterance: Utterance) -> None:
        """One utterance: its text, whether it is for us, the turn, the reply said."""
        try:
            text = await self.transcribe(to_wav(utterance.samples))
        except TranscriptionError as exc:
            if exc.kind != "empty":
                self.say(f"! {exc}")
            return
        heard = self.gate.hear(text, self.clock())
        if heard is None:
            self.say(f"· (not for me) {text}")
            return
        if not heard.request:  # the wake phrase alone: a tone, then the request
            self.say("· listening")
            if self.tone is not None:
                await self._play(self.tone)
            self.gate.replied(self.clock())
            return
        self.say(f"you: {heard.request}")
        reply = await self.ask(heard.request)
        if reply:
            self.say(f"{reply}\n")
            await self.speak(reply)
        self.replies += 1
        self.gate.replied(self.clock())

    async def ask(self, request: str) -> str:
        """The request as a turn of the session (attended: approvals come to the keyboard)."""
        turn = await self.turns.submit(self.session_id, request, attended=True, here=True)
        outcome = await self.turns.wait_turn(turn, poll=0.25)
        if outcome.status != "done":
            self.say(f"! turn {outcome.status}: {outcome.error or ''}".rstrip(": "))
        return outcome.reply

    async def speak(self, reply: str) -> None:
        """Say the reply (stripped, cut at a sentence); printed only when speaking fails."""
        if self.synthesizer is None:
            return
        words = reply_speech(reply, self.settings.max_chars)
        if not words:
            return
        try:
            audio = await self.synthesizer.synthesize(words, self.settings.voice, format="wav")
            pcm = read_wav(audio.data)
        except Exception as exc:  # a provider's failure must not end the conversation
            self.say(f"! speaking failed: {first_line(exc)}")
            return
        self.timings.reply_audio_at = self.clock()
        if not await self._play(pcm):
            self.timings.stopped_at = self.clock()
            self.say("· (interrupted)")

    async def _play(self, pcm: Pcm) -> bool:
        """Play it; False when stopped (barge-in). A device that fails (unplugged, taken)
        is said and the conversation goes on, as if it had played."""
        self._playing = True
        try:
            return await self.speaker.play(pcm)
        except Exception as exc:
            self.say(f"! playing failed: {first_line(exc)}")
            return True
        finally:
            self._playing = False
            self.detector.playing = False
