"""The energy detector on synthetic frames: start, pre-roll, end, length limits, the floor."""

from __future__ import annotations

import numpy as np
from pytest import approx

from habakkuk.voice.detector import (
    FRAME,
    RATE,
    DetectorSettings,
    Dropped,
    EnergyDetector,
    Event,
    Frame,
    SpeechStarted,
    Utterance,
    rms,
)

RNG = np.random.default_rng(7)


def tone(level: float, seconds: float) -> Frame:
    """A 220 Hz sine whose RMS is `level`."""
    t = np.arange(round(seconds * RATE), dtype=np.float32) / RATE
    wave: Frame = (np.sin(2 * np.pi * 220 * t) * level * np.sqrt(2)).astype(np.float32)
    return wave


def noise(level: float, seconds: float) -> Frame:
    """White noise whose RMS is about `level`."""
    return (RNG.standard_normal(round(seconds * RATE)) * level).astype(np.float32)


def feed(detector: EnergyDetector, audio: Frame) -> list[tuple[int, Event]]:
    """Every event, with the index of the frame that caused it."""
    events: list[tuple[int, Event]] = []
    for i in range(len(audio) // FRAME):
        events += [(i, e) for e in detector.feed(audio[i * FRAME : (i + 1) * FRAME])]
    return events


def utterances(events: list[tuple[int, Event]]) -> list[Utterance]:
    return [e for _, e in events if isinstance(e, Utterance)]


def test_speech_starts_after_60_ms_above_the_threshold() -> None:
    detector = EnergyDetector()
    events = feed(detector, np.concatenate([noise(0.001, 1.0), tone(0.1, 0.5)]))
    starts = [i for i, e in events if isinstance(e, SpeechStarted)]
    assert starts == [50 + 2]  # the third loud frame: 60 ms


def test_two_loud_frames_are_not_a_start() -> None:
    detector = EnergyDetector()
    blip = np.concatenate([noise(0.001, 0.5), tone(0.1, 0.04), noise(0.001, 1.5)])
    assert feed(detector, blip) == []


def test_an_utterance_keeps_300_ms_of_pre_roll_and_ends_after_the_silence() -> None:
    detector = EnergyDetector(DetectorSettings(silence_s=0.8))
    audio = np.concatenate([noise(0.001, 1.0), tone(0.1, 1.0), noise(0.001, 2.0)])
    events = feed(detector, audio)
    (said,) = utterances(events)
    end = next(i for i, e in events if isinstance(e, Utterance))
    assert end == 50 + 50 + 40 - 1  # the 40th quiet frame after the speech
    # 300 ms before the speech, the speech, 800 ms of quiet.
    assert said.seconds == approx(0.3 + 1.0 + 0.8)
    assert rms(said.samples[: int(0.3 * RATE)]) < 0.01  # the pre-roll is the quiet before
    assert rms(said.samples[int(0.3 * RATE) : int(1.3 * RATE)]) > 0.09
    assert not said.cut


def test_silence_setting_sets_the_end() -> None:
    detector = EnergyDetector(DetectorSettings(silence_s=0.4))
    audio = np.concatenate([noise(0.001, 0.5), tone(0.1, 1.0), noise(0.001, 1.0)])
    (said,) = utterances(feed(detector, audio))
    assert said.seconds == approx(0.3 + 1.0 + 0.4)


def test_a_pause_shorter_than_the_silence_does_not_end_it() -> None:
    detector = EnergyDetector()
    words = [tone(0.1, 0.5), noise(0.001, 0.5), tone(0.1, 0.5), noise(0.001, 1.0)]
    (said,) = utterances(feed(detector, np.concatenate([noise(0.001, 0.5), *words])))
    assert said.seconds == approx(0.3 + 1.5 + 0.8)


def test_under_300_ms_of_speech_is_dropped() -> None:
    detector = EnergyDetector()
    click = np.concatenate([noise(0.001, 0.5), tone(0.2, 0.2), noise(0.001, 1.0)])
    events = [e for _, e in feed(detector, click)]
    assert events == [SpeechStarted(), Dropped(0.2)]


def test_over_30_s_is_cut_there() -> None:
    detector = EnergyDetector()
    audio = np.concatenate([noise(0.001, 0.5), tone(0.1, 31.0), noise(0.001, 1.0)])
    said = utterances(feed(detector, audio))
    assert said[0].cut and said[0].seconds == approx(30.0)


def test_the_threshold_is_three_times_the_learned_noise_floor() -> None:
    detector = EnergyDetector()
    feed(detector, noise(0.015, 3.0))  # a fan: above a third of 0.02... below the minimum
    assert abs(detector.noise_floor - 0.015) < 0.002
    assert abs(detector.threshold - 3 * detector.noise_floor) < 1e-9
    # Speech at 0.03 RMS would pass the configured 0.02 but not the learned 0.045.
    assert feed(detector, np.concatenate([tone(0.03, 1.0), noise(0.015, 1.0)])) == []
    said = utterances(feed(detector, np.concatenate([tone(0.1, 1.0), noise(0.015, 1.0)])))
    assert len(said) == 1


def test_a_silent_input_never_lowers_the_threshold_below_the_setting() -> None:
    detector = EnergyDetector(DetectorSettings(threshold=0.02))
    feed(detector, np.zeros(3 * RATE, dtype=np.float32))
    assert detector.threshold == 0.02
    assert feed(detector, np.concatenate([tone(0.015, 1.0), noise(0.0, 1.0)])) == []


def test_while_a_reply_plays_speech_must_be_twice_as_loud() -> None:
    detector = EnergyDetector()
    detector.playing = True
    assert detector.threshold == 0.04
    assert feed(detector, np.concatenate([tone(0.03, 1.0), noise(0.001, 1.0)])) == []
    events = feed(detector, np.concatenate([tone(0.06, 1.0), noise(0.001, 1.0)]))
    assert isinstance(events[0][1], SpeechStarted)


def test_the_reply_leaking_in_is_not_learned_as_the_noise_floor() -> None:
    detector = EnergyDetector()
    feed(detector, noise(0.002, 1.0))
    detector.playing = True
    feed(detector, noise(0.012, 2.0))  # under the playing threshold, but not room noise
    assert detector.noise_floor < 0.004
