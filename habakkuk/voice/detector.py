"""The energy detector: utterances out of 20 ms frames of 16 kHz mono audio.

Speech starts after 60 ms above the threshold, keeps 300 ms of audio from before it
(pre-roll, so the first syllable is not clipped), and ends after `silence` of quiet.
Anything with under 300 ms of speech is dropped (a click, a cough) and anything over
30 s is cut there. The threshold is `threshold` RMS or three times the noise floor
learned while nobody talks, whichever is higher, so a silent input cannot make every
click an utterance; while a reply plays it is doubled (no echo cancellation: the reply
leaking into the microphone must not count as the user barging in).

Pure: frames in, events out, no clock and no device, so it is tested on synthetic frames.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

RATE = 16_000  # samples per second
FRAME = 320  # samples per frame: 20 ms
FRAME_S = FRAME / RATE

Frame = npt.NDArray[np.float32]  # one frame, samples in [-1, 1]


@dataclass(frozen=True)
class DetectorSettings:
    """The detector's knobs (`talk:` gives threshold and silence)."""

    threshold: float = 0.02  # RMS; the learned threshold never falls below it
    silence_s: float = 0.8  # this much quiet ends an utterance
    start_s: float = 0.06  # this much above the threshold starts one
    preroll_s: float = 0.3  # audio kept from before the start
    min_speech_s: float = 0.3  # shorter speech is dropped
    max_s: float = 30.0  # longer utterances are cut
    floor_factor: float = 3.0  # the threshold is at least this times the noise floor
    playing_factor: float = 2.0  # and this much higher while a reply plays
    floor_weight: float = 0.05  # how fast the floor follows the quiet (per frame)


@dataclass(frozen=True)
class SpeechStarted:
    """Someone started talking (a reply playing now should stop: barge-in)."""


@dataclass(frozen=True)
class Utterance:
    """One utterance: its samples (pre-roll included) and whether it was cut at the maximum."""

    samples: Frame
    cut: bool = False

    @property
    def seconds(self) -> float:
        """Its length."""
        return len(self.samples) / RATE


@dataclass(frozen=True)
class Dropped:
    """Speech started but was too short to be an utterance."""

    speech_s: float


Event = SpeechStarted | Utterance | Dropped


def rms(frame: Frame) -> float:
    """The frame's root mean square level."""
    if frame.size == 0:
        return 0.0
    return float(np.sqrt(np.mean(np.square(frame, dtype=np.float32))))


def _frames(seconds: float) -> int:
    return max(1, round(seconds / FRAME_S))


class EnergyDetector:
    """Feed it frames in order; it says when speech starts and hands back utterances."""

    def __init__(self, settings: DetectorSettings | None = None) -> None:
        self.settings = settings = settings or DetectorSettings()
        self.playing = False  # set by the loop while a reply plays
        self.noise_floor = 0.0
        self._start = _frames(settings.start_s)
        self._silence = _frames(settings.silence_s)
        self._min_speech = _frames(settings.min_speech_s)
        self._max = _frames(settings.max_s)
        # Before speech: the pre-roll plus the frames of a start that may be beginning.
        self._before: deque[Frame] = deque(maxlen=_frames(settings.preroll_s) + self._start)
        self._loud_run = 0
        self._speaking = False
        self._kept: list[Frame] = []
        self._quiet_run = 0
        self._speech_frames = 0  # from the start to the last loud frame
        self._preroll_kept = 0  # how many kept frames came before the start

    @property
    def speaking(self) -> bool:
        """Whether an utterance is under way."""
        return self._speaking

    @property
    def threshold(self) -> float:
        """The RMS a frame must exceed to count as speech now."""
        s = self.settings
        level = max(s.threshold, s.floor_factor * self.noise_floor)
        return level * s.playing_factor if self.playing else level

    def reset(self) -> None:
        """Forget any speech under way (the floor learned is kept)."""
        self._before.clear()
        self._loud_run = 0
        self._speaking = False
        self._kept = []
        self._quiet_run = 0
        self._speech_frames = 0

    def feed(self, frame: Frame) -> list[Event]:
        """Take the next 20 ms frame; the events it caused, in order (usually none)."""
        level = rms(frame)
        loud = level > self.threshold
        if not self._speaking:
            return self._idle(frame, level, loud)
        self._kept.append(frame)
        if loud:
            self._quiet_run = 0
            self._speech_frames = len(self._kept) - self._preroll_kept
        else:
            self._quiet_run += 1
        if len(self._kept) >= self._max:
            return [self._finish(cut=True)]
        if self._quiet_run >= self._silence:
            return [self._finish(cut=False)]
        return []

    def _idle(self, frame: Frame, level: float, loud: bool) -> list[Event]:
        self._before.append(frame)
        if not loud:
            self._loud_run = 0
            if not self.playing:  # the reply leaking into the microphone is not the room
                w = self.settings.floor_weight
                self.noise_floor = (
                    level if self.noise_floor == 0.0 else (1 - w) * self.noise_floor + w * level
                )
            return []
        self._loud_run += 1
        if self._loud_run < self._start:
            return []
        self._speaking = True
        self._kept = list(self._before)
        self._preroll_kept = len(self._kept) - self._loud_run
        self._speech_frames = self._loud_run
        self._quiet_run = 0
        self._before.clear()
        self._loud_run = 0
        return [SpeechStarted()]

    def _finish(self, *, cut: bool) -> Event:
        kept, speech = self._kept, self._speech_frames
        self.reset()
        if speech < self._min_speech:
            return Dropped(speech * FRAME_S)
        return Utterance(np.concatenate(kept), cut=cut)
