"""`when`: the timetable of a schedule, parsed once and asked for the next fire time.

Forms (spec 000 "Schedules"), read in the config timezone:

- a 5-field cron expression (`0 8 * * 1-5`), evaluated in local wall time, so 08:00
  stays 08:00 local across DST changes;
- `@hourly`, `@daily`, `@weekly`, `@monthly` (the cron shorthands);
- `@every 2h` / `30m` / `90s` / `1d` / `1h30m`: fixed intervals counted from the
  schedule's creation, in UTC (DST never stretches or shrinks an interval); `every 5m`
  and `every 2 hours` (what people type) read as `@every` too, stored as `@every 5m`;
- `at YYYY-MM-DD HH:MM`: once, local wall time.

DST, decided here and pinned by tests/work/test_when.py:

- Spring gap (clocks jump from 02:00 to 03:00): a cron slot whose wall time does not
  exist that day (02:30) fires ONCE at the first valid instant, the moment the clocks
  jump (03:00 local); several slots inside the gap collapse into that one firing.
- Autumn fold (01:00-02:00 happens twice): a slot fires ONCE, at the first occurrence
  of its wall time; the repeated hour fires nothing that already fired.

Anything that could be read two ways is refused with the reading(s) it could mean
(a bare `30m`, a six-field cron, `at` without a date, an unknown `@word`): WhenError,
one line. `When.reading()` says in words how a parsed `when` was understood ("every 5
minutes"), which `habakkuk schedules add` echoes back.
"""

from __future__ import annotations

import abc
import datetime as dt
import difflib
import math
import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from habakkuk.work.schedule_types import TICK_SECONDS, WhenError

UTC = dt.UTC

SHORTHANDS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
}
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^(?:\d+[smhd])+$")
_DURATION_PART = re.compile(r"(\d+)([smhd])")
_AT = re.compile(r"^at\s+(\d{4}-\d{2}-\d{2})[ T](\d{1,2}:\d{2})$")
_TIME_ONLY = re.compile(r"^(?:at\s+)?(\d{1,2}):(\d{2})$")
# `every 2 hours 30 minutes`: a number and a unit word, repeated.
_UNIT_WORDS = {
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "m": "m", "min": "m", "mins": "m", "minute": "m", "minutes": "m",
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "d": "d", "day": "d", "days": "d",
}  # fmt: skip
_WORDED_PART = re.compile(r"(\d+)\s*([a-z]+)")
_UNIT_NAMES = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))
_WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
# Cron searches never need more steps than this (a fold skips at most an hour of
# minute slots); past it the expression has no next time worth waiting for.
_MAX_STEPS = 5000


class When(abc.ABC):
    """A parsed `when`: `spec` is its normalised text."""

    spec: str

    @abc.abstractmethod
    def next_after(self, after: dt.datetime) -> dt.datetime | None:
        """The first fire time strictly after `after` (aware), in the config timezone;
        None when there is none (a one-off that has passed)."""

    def next_epoch(self, after: float) -> float | None:
        """`next_after` in epoch seconds (what control.db stores)."""
        found = self.next_after(dt.datetime.fromtimestamp(after, UTC))
        # A datetime keeps microseconds only; never hand back `after` itself, or a
        # loop stepping slot by slot (the tick's) would never end.
        while found is not None and found.timestamp() <= after:
            found = self.next_after(found + dt.timedelta(microseconds=1))
        return found.timestamp() if found is not None else None

    @abc.abstractmethod
    def reading(self) -> str:
        """How the timetable was understood, in words ("every 5 minutes")."""

    def upcoming(self, after: dt.datetime, count: int) -> list[dt.datetime]:
        """The next `count` fire times after `after`."""
        times: list[dt.datetime] = []
        cursor: dt.datetime | None = after
        while cursor is not None and len(times) < count:
            found = self.next_after(cursor)
            if found is not None and found <= cursor:  # never the same time twice
                found = self.next_after(cursor + dt.timedelta(microseconds=1))
            cursor = found
            if cursor is not None:
                times.append(cursor)
        return times


@dataclass
class CronWhen(When):
    """A 5-field cron expression in local wall time of `tz` (`spec`: as written,
    e.g. "@daily"; `expr`: the five fields)."""

    expr: str
    tz: ZoneInfo
    spec: str = ""

    def __post_init__(self) -> None:
        self.spec = self.spec or self.expr

    def next_after(self, after: dt.datetime) -> dt.datetime | None:
        from croniter import CroniterError, croniter  # 65 ms to import: only when used

        local = after.astimezone(self.tz).replace(tzinfo=None)
        # croniter runs on naive wall time; each candidate is then placed on the
        # timeline by `_instant` (gap: the jump; fold: the first occurrence).
        it = croniter(self.expr, local)
        for _ in range(_MAX_STEPS):
            try:
                candidate: dt.datetime = it.get_next(dt.datetime)
            except CroniterError:  # no date matches (30 February)
                return None
            instant = _instant(candidate, self.tz)
            if instant > after:
                return instant.astimezone(self.tz)
        return None

    def reading(self) -> str:
        return cron_reading(self.expr)


@dataclass
class EveryWhen(When):
    """Fixed intervals of `seconds` from `anchor` (epoch seconds, the creation time)."""

    spec: str
    seconds: float
    anchor: float
    tz: ZoneInfo

    def next_after(self, after: dt.datetime) -> dt.datetime | None:
        return dt.datetime.fromtimestamp(self._next(after.timestamp()), self.tz)

    def next_epoch(self, after: float) -> float | None:
        # In floats, not through datetime: a datetime keeps microseconds only, so an
        # anchor with finer digits came back as the same slot and the tick spun on it.
        return self._next(after)

    def _next(self, after: float) -> float:
        steps = max(0, math.floor((after - self.anchor) / self.seconds) + 1)
        slot = self.anchor + steps * self.seconds
        while slot <= after:  # float rounding must never give back `after` itself
            slot += self.seconds
        return slot

    def reading(self) -> str:
        return f"every {span_words(self.seconds)}"


@dataclass
class AtWhen(When):
    """Once, at `moment`."""

    spec: str
    moment: dt.datetime

    def next_after(self, after: dt.datetime) -> dt.datetime | None:
        return self.moment if self.moment > after else None

    def reading(self) -> str:
        return f"once, {self.spec}"


def span_words(seconds: float) -> str:
    """90 -> "1 minute 30 seconds", 300 -> "5 minutes", 86400 -> "1 day"."""
    left = int(seconds)
    parts = []
    for name, size in _UNIT_NAMES:
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count} {name}" + ("" if count == 1 else "s"))
    return " ".join(parts) or "0 seconds"


def cron_reading(expr: str) -> str:
    """A cron expression in words where it is a plain one (a fixed time on every day, on
    weekdays or on one day of the week or month), else the expression itself."""
    fields = expr.split()
    minute, hour, day, month, weekday = fields
    if not (minute.isdigit() and hour.isdigit()):
        if minute.isdigit() and hour == "*" and (day, month, weekday) == ("*", "*", "*"):
            return f"every hour at minute {int(minute)}"
        return f"cron {expr} (minute hour day month weekday)"
    at = f"at {int(hour):02d}:{int(minute):02d}"
    if month != "*":
        return f"cron {expr} (minute hour day month weekday)"
    if day == "*" and weekday == "*":
        return f"every day {at}"
    if day == "*" and weekday == "1-5":
        return f"every weekday (Monday to Friday) {at}"
    if day == "*" and weekday.isdigit() and int(weekday) <= 7:
        return f"every {_WEEKDAYS[int(weekday) % 7]} {at}"
    if weekday == "*" and day.isdigit():
        return f"on day {int(day)} of every month {at}"
    return f"cron {expr} (minute hour day month weekday)"


def _exists(naive: dt.datetime, tz: ZoneInfo) -> bool:
    aware = naive.replace(tzinfo=tz)
    return aware.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == naive


def _instant(naive: dt.datetime, tz: ZoneInfo) -> dt.datetime:
    """Local wall time -> an instant: the first occurrence in a fold, the moment the
    clocks jump for a time inside a gap."""
    if _exists(naive, tz):
        return naive.replace(tzinfo=tz, fold=0)
    # Inside a gap the two readings straddle the transition: fold=1 uses the offset
    # after it (an instant before the jump), fold=0 the offset before (after it).
    lo = naive.replace(tzinfo=tz, fold=1).astimezone(UTC)
    hi = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if lo > hi:
        lo, hi = hi, lo
    after_offset = hi.astimezone(tz).utcoffset()
    # Transitions fall on whole minutes: bisect the minutes between the two readings.
    low, high = 0, int((hi - lo).total_seconds() // 60)
    while low < high:
        mid = (low + high) // 2
        if (lo + dt.timedelta(minutes=mid)).astimezone(tz).utcoffset() == after_offset:
            high = mid
        else:
            low = mid + 1
    return lo + dt.timedelta(minutes=low)


def duration_seconds(text: str) -> float | None:
    """`2h`, `30m`, `90s`, `1d`, `1h30m` -> seconds; None when it is not a duration."""
    text = text.strip().lower()
    if not _DURATION.match(text):
        return None
    return float(sum(int(n) * UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(text)))


def parse_when(
    text: str,
    tz: ZoneInfo,
    *,
    anchor: float,
    now: dt.datetime | None = None,
) -> When:
    """Parse `text`; `anchor` is the schedule's creation (what `@every` counts from).

    With `now` (adding a schedule), a one-off in the past is refused; without it (a
    stored schedule) it parses and simply has no next time.
    """
    spec = " ".join(text.split())
    if not spec:
        raise WhenError(
            "when: empty; use a cron expression (0 8 * * 1-5), @every 2h, "
            "@daily or at YYYY-MM-DD HH:MM"
        )
    lowered = spec.lower()
    if lowered.startswith("@every"):
        return _parse_every(spec, lowered, tz, anchor)
    if lowered.startswith("@"):
        word = lowered.split()[0]
        if word in SHORTHANDS and word == lowered:
            return CronWhen(SHORTHANDS[word], tz, lowered)
        if word in SHORTHANDS:
            raise WhenError(f"when {spec!r}: {word} takes nothing after it")
        return _unknown_word(spec, word)
    if lowered.startswith("at ") or lowered == "at":
        return _parse_at(spec, lowered, tz, now)
    if duration_seconds(lowered) is not None:
        raise WhenError(f"when {spec!r}: a bare duration; did you mean '@every {lowered}'?")
    if lowered.startswith("every "):
        # What people type for @every: `every 5m`, `every 2 hours 30 minutes`.
        worded = _worded_duration(lowered[len("every ") :])
        if worded is not None:
            return _parse_every(spec, f"@every {worded}", tz, anchor)
        raise WhenError(
            f"when {spec!r}: every takes a duration such as 90s, 30m, 2h or 1d (every 30m); "
            "for a time of day use @daily or cron (0 8 * * *)"
        )
    if _TIME_ONLY.match(lowered):
        return _time_without_date(spec, lowered, tz, now)
    return _parse_cron(spec, tz, checked=now is not None)


def _parse_every(spec: str, lowered: str, tz: ZoneInfo, anchor: float) -> When:
    rest = lowered[len("@every") :].strip()
    seconds = duration_seconds(rest.replace(" ", ""))
    if not rest or seconds is None:
        raise WhenError(f"when {spec!r}: @every takes a duration such as 90s, 30m, 2h or 1d")
    if seconds < TICK_SECONDS:
        raise WhenError(
            f"when {spec!r}: shorter than the scheduler's {TICK_SECONDS:g} s minimum; "
            f"use @every {TICK_SECONDS:g}s or more"
        )
    # Whole seconds: a slot then survives the trip through a datetime (microseconds
    # only) exactly, so the fire times after a stored next_run are never that slot again.
    return EveryWhen(f"@every {rest.replace(' ', '')}", seconds, float(math.floor(anchor)), tz)


def _worded_duration(text: str) -> str | None:
    """`5 minutes`, `1h 30m`, `90s` -> "5m", "1h30m", "90s"; None when it is not one."""
    compact = text.replace(" ", "")
    if duration_seconds(compact) is not None:
        return compact
    parts = _WORDED_PART.findall(text)
    if not parts or _WORDED_PART.sub("", text).strip(" ,and"):
        return None
    units = [_UNIT_WORDS.get(unit) for _, unit in parts]
    if None in units:
        return None
    return "".join(f"{int(number)}{unit}" for (number, _), unit in zip(parts, units, strict=True))


def _unknown_word(spec: str, word: str) -> When:
    known = [*SHORTHANDS, "@every"]
    close = difflib.get_close_matches(word, known, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise WhenError(
        f"when {spec!r}: unknown {word}; {hint}use @every DURATION, " + ", ".join(SHORTHANDS)
    )


def _parse_at(spec: str, lowered: str, tz: ZoneInfo, now: dt.datetime | None) -> When:
    match = _AT.match(lowered)
    if match is None:
        if _TIME_ONLY.match(lowered):
            return _time_without_date(spec, lowered, tz, now)
        raise WhenError(f"when {spec!r}: write a one-off as at YYYY-MM-DD HH:MM")
    try:
        naive = dt.datetime.fromisoformat(
            f"{match[1]} {int(match[2].split(':')[0]):02d}:{match[2].split(':')[1]}"
        )
    except ValueError:
        raise WhenError(f"when {spec!r}: no such date or time") from None
    if not _exists(naive, tz):
        raise WhenError(
            f"when {spec!r}: {naive:%Y-%m-%d %H:%M} does not exist in {tz.key} "
            "(the clocks jump forward then)"
        )
    moment = naive.replace(tzinfo=tz, fold=0)
    if now is not None and moment <= now:
        raise WhenError(f"when {spec!r}: that is in the past ({tz.key})")
    return AtWhen(f"at {naive:%Y-%m-%d %H:%M}", moment)


def _time_without_date(spec: str, lowered: str, tz: ZoneInfo, now: dt.datetime | None) -> When:
    match = _TIME_ONLY.match(lowered)
    assert match is not None
    hour, minute = int(match[1]), int(match[2])
    if hour > 23 or minute > 59:
        raise WhenError(f"when {spec!r}: no such time")
    daily = f"{minute} {hour} * * *"
    base = (now or dt.datetime.now(UTC)).astimezone(tz)
    nxt = CronWhen(daily, tz).next_after(base)
    once = f"at {nxt:%Y-%m-%d %H:%M}" if nxt else "at YYYY-MM-DD HH:MM"
    raise WhenError(
        f"when {spec!r}: a time without a date; did you mean '{once}' (once) "
        f"or '{daily}' (every day)?"
    )


def _valid_cron(expr: str) -> bool:
    from croniter import croniter

    return bool(croniter.is_valid(expr))


def _parse_cron(spec: str, tz: ZoneInfo, *, checked: bool) -> When:
    fields = spec.split()
    if len(fields) == 6:
        raise WhenError(
            f"when {spec!r}: six fields: seconds are not supported; did you mean "
            f"'{' '.join(fields[1:])}' (the first field dropped as seconds)?"
        )
    if len(fields) != 5:
        raise WhenError(
            f"when {spec!r}: a cron expression has 5 fields (minute hour day month weekday), "
            f"this has {len(fields)}; or use @every 2h, @daily, at YYYY-MM-DD HH:MM"
        )
    if not _valid_cron(spec):
        raise WhenError(
            f"when {spec!r}: not a valid cron expression (minute hour day month weekday)"
        )
    when = CronWhen(spec, tz)
    # A valid expression that never fires (30 February) is refused when it is added.
    if checked and when.next_after(dt.datetime.now(UTC)) is None:
        raise WhenError(f"when {spec!r}: this cron expression never fires")
    return when


def preview(
    text: str, tz: ZoneInfo, *, count: int = 3, now: dt.datetime | None = None
) -> list[dt.datetime]:
    """The next `count` fire times of `text` from `now` (WhenError when not understood)."""
    now = now or dt.datetime.now(UTC)
    when = parse_when(text, tz, anchor=now.timestamp(), now=now)
    return when.upcoming(now, count)
