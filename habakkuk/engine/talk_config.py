"""`talk:`: the local voice loop's settings (`habakkuk talk`, the terminal's push-to-talk
key): the detector's threshold and silence, the wake phrases and the follow-up window,
barge-in, and which devices to use."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .config_schema import line_of
from .durations import parse_duration
from .errors import ConfigError

TALK_PLAYERS = ("ffplay", "paplay", "aplay", "afplay")


@dataclass
class TalkConfig:
    """`talk`: the local voice loop (`habakkuk talk`, the terminal's push-to-talk key)."""

    threshold: float = 0.02  # RMS; the learned threshold (3x the noise floor) never goes lower
    silence: float | str = "800ms"  # this much quiet ends an utterance
    follow_up: float | str = "30s"  # after a reply, no wake phrase needed for this long
    wake: str | list[str] | None = None  # wake phrases (comma-separated or a list)
    barge_in: bool = True  # speech while a reply plays stops it
    player: str | None = None  # ffplay, paplay, aplay or afplay where PortAudio cannot play
    device: int | str | None = None  # the sounddevice input device (index or name)
    # Derived by resolve_talk.
    silence_seconds: float = field(default=0.8, init=False)
    follow_up_seconds: float = field(default=30.0, init=False)
    wake_phrases: tuple[str, ...] = field(default=(), init=False)


def resolve_talk(talk: TalkConfig, path: Path) -> None:
    """Check the section read from `path` (a threshold within (0, 1), durations, at least
    one phrase when `wake` is given, a known player) and derive its values."""

    def fail(key: str, message: str) -> ConfigError:
        return ConfigError(f"{path}:{line_of(talk, key)}: talk.{key}: {message}")

    if not 0 < talk.threshold < 1:
        raise fail(
            "threshold", f"{talk.threshold} must be an RMS level between 0 and 1 (e.g. 0.02)"
        )
    for key in ("silence", "follow_up"):
        try:
            setattr(talk, f"{key}_seconds", parse_duration(getattr(talk, key)))
        except ValueError as exc:
            raise fail(key, str(exc)) from None
    phrases = talk.wake if isinstance(talk.wake, list) else (talk.wake or "").split(",")
    talk.wake_phrases = tuple(p.strip() for p in phrases if p.strip())
    if talk.wake is not None and not talk.wake_phrases:
        raise fail("wake", "no phrase given (e.g. wake: hey habakkuk)")
    if talk.player is not None and talk.player not in TALK_PLAYERS:
        raise fail("player", f"{talk.player!r} is not one of {', '.join(TALK_PLAYERS)}")
