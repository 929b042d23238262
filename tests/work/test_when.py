"""Parsing `when`: every form, every refusal, and DST both ways (Europe/Paris,
America/New_York)."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from habakkuk.work.schedule_types import WhenError
from habakkuk.work.when import parse_when, preview

PARIS = ZoneInfo("Europe/Paris")
NEW_YORK = ZoneInfo("America/New_York")
UTC = dt.UTC
NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def local(when: list[dt.datetime], tz: ZoneInfo) -> list[str]:
    return [t.astimezone(tz).strftime("%Y-%m-%d %H:%M%z") for t in when]


def test_weekday_cron_fires_at_eight_local_across_the_spring_change() -> None:
    when = parse_when("0 8 * * 1-5", PARIS, anchor=0)
    start = dt.datetime(2026, 3, 26, 12, 0, tzinfo=PARIS)  # Thursday; clocks go forward Sun 29
    assert local(when.upcoming(start, 3), PARIS) == [
        "2026-03-27 08:00+0100",
        "2026-03-30 08:00+0200",
        "2026-03-31 08:00+0200",
    ]


def test_a_slot_inside_the_spring_gap_fires_once_when_the_clocks_jump() -> None:
    when = parse_when("30 2 * * *", PARIS, anchor=0)
    start = dt.datetime(2026, 3, 28, 12, 0, tzinfo=PARIS)
    assert local(when.upcoming(start, 2), PARIS) == [
        "2026-03-29 03:00+0200",  # 02:30 does not exist that day
        "2026-03-30 02:30+0200",
    ]


def test_several_slots_inside_the_gap_collapse_into_one_firing() -> None:
    when = parse_when("*/20 * * * *", NEW_YORK, anchor=0)
    start = dt.datetime(2026, 3, 8, 1, 30, tzinfo=NEW_YORK)  # 02:00-03:00 skipped that day
    assert local(when.upcoming(start, 3), NEW_YORK) == [
        "2026-03-08 01:40-0500",
        "2026-03-08 03:00-0400",
        "2026-03-08 03:20-0400",
    ]


def test_a_slot_in_the_autumn_fold_fires_once_at_its_first_occurrence() -> None:
    when = parse_when("30 1 * * *", NEW_YORK, anchor=0)  # 01:30 happens twice on Nov 1
    start = dt.datetime(2026, 10, 31, 12, 0, tzinfo=NEW_YORK)
    fired = when.upcoming(start, 2)
    assert [t.astimezone(UTC).strftime("%m-%d %H:%M") for t in fired] == [
        "11-01 05:30",  # 01:30 EDT, the first time
        "11-02 06:30",  # the next day, 01:30 EST
    ]


def test_the_repeated_hour_of_the_fold_fires_nothing_twice() -> None:
    when = parse_when("*/20 * * * *", PARIS, anchor=0)
    start = dt.datetime(2026, 10, 25, 0, 50, tzinfo=PARIS)
    fired = [t.astimezone(UTC).strftime("%H:%M") for t in when.upcoming(start, 8)]
    # 02:00, 02:20, 02:40 local fire in CEST (00:00-00:40 UTC), not again in CET.
    assert fired == ["23:00", "23:20", "23:40", "00:00", "00:20", "00:40", "02:00", "02:20"]


def test_every_counts_fixed_intervals_from_creation_in_utc() -> None:
    anchor = dt.datetime(2026, 3, 29, 0, 10, tzinfo=UTC).timestamp()
    when = parse_when("@every 2h", PARIS, anchor=anchor)
    fired = when.upcoming(dt.datetime.fromtimestamp(anchor, UTC), 3)
    assert [t.astimezone(UTC).strftime("%H:%M") for t in fired] == ["02:10", "04:10", "06:10"]
    assert when.spec == "@every 2h"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("@every 90s", 90), ("@every 30m", 1800), ("@every 1h30m", 5400), ("@EVERY 1d", 86400)],
)
def test_every_accepts_seconds_minutes_hours_days(text: str, seconds: int) -> None:
    when = parse_when(text, PARIS, anchor=NOW.timestamp())
    assert when.next_epoch(NOW.timestamp()) == NOW.timestamp() + seconds


@pytest.mark.parametrize(
    ("text", "spec", "seconds"),
    [
        ("every 5m", "@every 5m", 300),
        ("Every 2h", "@every 2h", 7200),
        ("every 1h 30m", "@every 1h30m", 5400),
        ("every 2 hours 30 minutes", "@every 2h30m", 9000),
        ("every 90 seconds", "@every 90s", 90),
        ("every 1 day", "@every 1d", 86400),
    ],
)
def test_every_without_the_at_sign_is_read_as_at_every(text: str, spec: str, seconds: int) -> None:
    when = parse_when(text, PARIS, anchor=NOW.timestamp(), now=NOW)
    assert when.spec == spec
    assert when.next_epoch(NOW.timestamp()) == NOW.timestamp() + seconds


@pytest.mark.parametrize(
    ("text", "reading"),
    [
        ("every 5m", "every 5 minutes"),
        ("@every 1h30m", "every 1 hour 30 minutes"),
        ("@every 90s", "every 1 minute 30 seconds"),
        ("@hourly", "every hour at minute 0"),
        ("@daily", "every day at 00:00"),
        ("@weekly", "every Sunday at 00:00"),
        ("@monthly", "on day 1 of every month at 00:00"),
        ("0 8 * * 1-5", "every weekday (Monday to Friday) at 08:00"),
        ("30 7 * * *", "every day at 07:30"),
        ("0 9 * * 1", "every Monday at 09:00"),
        ("*/5 * * * *", "cron */5 * * * * (minute hour day month weekday)"),
        ("at 2026-12-01 9:00", "once, at 2026-12-01 09:00"),
    ],
)
def test_each_form_says_how_it_was_read(text: str, reading: str) -> None:
    assert parse_when(text, PARIS, anchor=NOW.timestamp(), now=NOW).reading() == reading


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("@hourly", "2026-06-01 15:00+0200"),
        ("@daily", "2026-06-02 00:00+0200"),
        ("@weekly", "2026-06-07 00:00+0200"),
        ("@monthly", "2026-07-01 00:00+0200"),
    ],
)
def test_shorthands_fire_at_their_cron_times(text: str, first: str) -> None:
    when = parse_when(text, PARIS, anchor=0)
    assert local(when.upcoming(NOW, 1), PARIS) == [first]
    assert when.spec == text


def test_at_fires_once_in_local_time_then_never() -> None:
    when = parse_when("at 2026-12-01  09:00", PARIS, anchor=0, now=NOW)
    assert when.spec == "at 2026-12-01 09:00"
    assert local(when.upcoming(NOW, 3), PARIS) == ["2026-12-01 09:00+0100"]


def test_preview_lists_the_next_three_fire_times() -> None:
    assert local(preview("0 8 * * 1-5", PARIS, now=NOW), PARIS) == [
        "2026-06-02 08:00+0200",
        "2026-06-03 08:00+0200",
        "2026-06-04 08:00+0200",
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("30m", "did you mean '@every 30m'?"),
        ("2h", "did you mean '@every 2h'?"),
        ("every day", "every takes a duration such as 90s, 30m, 2h or 1d"),
        ("0 0 8 * * 1-5", "six fields: seconds are not supported; did you mean '0 8 * * 1-5'"),
        ("at 09:00", "a time without a date; did you mean 'at 2026-06-02 09:00' (once)"),
        ("09:00", "or '0 9 * * *' (every day)"),
        ("@dayly", "unknown @dayly; did you mean @daily?"),
        ("@fortnightly", "unknown @fortnightly"),
        ("@every", "@every takes a duration"),
        ("@every 5s", "shorter than the scheduler's 15 s minimum"),
        ("@daily 8", "@daily takes nothing after it"),
        ("at 2026-01-01 10:00", "in the past"),
        ("at 2026-13-01 10:00", "no such date or time"),
        ("at tomorrow", "write a one-off as at YYYY-MM-DD HH:MM"),
        ("at 2026-03-29 02:30", "does not exist in Europe/Paris"),
        ("61 * * * *", "not a valid cron expression"),
        ("0 0 30 2 *", "never fires"),
        ("0 8 * *", "a cron expression has 5 fields"),
        ("   ", "when: empty"),
    ],
)
def test_ambiguous_or_unknown_when_is_refused_with_its_reading(text: str, says: str) -> None:
    with pytest.raises(WhenError) as caught:
        parse_when(text, PARIS, anchor=NOW.timestamp(), now=NOW)
    message = str(caught.value)
    assert says in message
    assert "\n" not in message


def test_a_stored_one_off_in_the_past_parses_and_has_no_next_time() -> None:
    when = parse_when("at 2026-01-01 10:00", PARIS, anchor=0)
    assert when.next_after(NOW) is None


def test_every_never_gives_back_the_slot_it_was_asked_after() -> None:
    # An anchor with digits finer than a microsecond (time.time() has them) once made
    # next_epoch return its own argument, and the tick spun on that slot.
    when = parse_when("@every 15s", ZoneInfo("UTC"), anchor=1764583200.1234564)
    slot = when.next_epoch(1764583200.1234564)
    assert slot is not None
    for _ in range(1000):
        following = when.next_epoch(slot)
        assert following is not None and following > slot
        assert abs(following - slot - 15) < 1e-6
        slot = following
