"""Wake phrases, matched on the transcript of each utterance, and the follow-up window.

The first words of the transcript (after up to two fillers such as "um") must be within
an edit distance of a quarter of the phrase's length of a wake phrase; words the
transcriber merged or split ("heyhabakkuk", "haba kuk") match too. The rest of the
utterance is the request; the phrase alone means "I am listening" (a tone, then wait).
For `follow_up` after a reply finishes no phrase is needed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FILLERS = frozenset({"um", "umm", "uh", "uhh", "er", "erm", "hmm", "hm", "ah", "oh", "so", "well"})
MAX_FILLERS = 2
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")


def parse_phrases(text: str) -> tuple[str, ...]:
    """Comma-separated phrases (`--wake "hey habakkuk, ok computer"`), normalized."""
    phrases = (" ".join(_WORD.findall(part.lower())) for part in text.split(","))
    return tuple(p for p in phrases if p)


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions, one each."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


@dataclass(frozen=True)
class Heard:
    """What an utterance asks for: `request` is "" when it was the wake phrase alone."""

    request: str
    woke: bool  # a wake phrase was said


def match_wake(transcript: str, phrases: tuple[str, ...]) -> Heard | None:
    """The request after a wake phrase at the start of `transcript`, or None without one."""
    words = list(_WORD.finditer(transcript.lower()))
    best: tuple[int, int] | None = None  # (distance, index of the first word after it)
    for skip in range(MAX_FILLERS + 1):
        if skip and (skip > len(words) or words[skip - 1].group() not in FILLERS):
            break
        for phrase in phrases:
            target = phrase.replace(" ", "")
            limit = len(phrase) // 4
            count = phrase.count(" ") + 1
            for take in range(1, count + 2):
                if skip + take > len(words):
                    break
                heard = "".join(w.group() for w in words[skip : skip + take])
                distance = edit_distance(heard, target)
                if distance <= limit and (best is None or distance < best[0]):
                    best = (distance, skip + take)
    if best is None:
        return None
    end = best[1]
    rest = transcript[words[end - 1].end() :] if end else transcript
    return Heard(rest.lstrip(" \t,.!?;:-—").strip(), woke=True)


class WakeGate:
    """Which utterances are requests: with wake phrases, those that start with one, and any
    said within `follow_up` seconds after a reply; without phrases, every one."""

    def __init__(self, phrases: tuple[str, ...], follow_up_s: float) -> None:
        self.phrases = phrases
        self.follow_up_s = follow_up_s
        self._open_until = float("-inf")

    def replied(self, now: float) -> None:
        """A reply finished playing at `now`: the follow-up window opens."""
        self._open_until = now + self.follow_up_s

    def close(self) -> None:
        """End the follow-up window (the user went quiet or said the phrase alone)."""
        self._open_until = float("-inf")

    def following_up(self, now: float) -> bool:
        """Whether an utterance at `now` needs no wake phrase."""
        return not self.phrases or now <= self._open_until

    def hear(self, transcript: str, now: float) -> Heard | None:
        """The request in `transcript` heard at `now`, or None when it is not for us."""
        text = transcript.strip()
        if not self.phrases:
            return Heard(text, woke=False) if text else None
        heard = match_wake(text, self.phrases)
        if heard is not None:
            return heard
        if self.following_up(now) and text:
            return Heard(text, woke=False)
        return None
