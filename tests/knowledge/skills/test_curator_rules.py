"""The curator's decisions on values: near-duplicates, the keeper, staleness."""

from __future__ import annotations

import datetime as dt

from habakkuk.knowledge.skills.curator_rules import (
    description_share,
    duplicate_rule,
    plan_merges,
    plural_names,
    stale,
)
from habakkuk.knowledge.skills.types import Skill, SkillSummary

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def skill(
    name: str,
    description: str = "",
    body: str = "",
    *,
    last_used: str | None = None,
    updated: str = "2026-11-01T00:00:00Z",
    pinned: bool = False,
) -> Skill:
    summary = SkillSummary(
        name=name,
        description=description or f"Unrelated work called {name} entirely",
        scope="own",
        source="own",
        trusted=True,
        last_used=last_used,
        updated=updated,
        pinned=pinned,
    )
    return Skill(summary, body or f"Instructions only {name} has.")


def test_same_body_after_whitespace_is_a_duplicate() -> None:
    a = skill("deploy", body="1. Build\n2.  Ship\n")
    b = skill("release", body="  1. Build 2. Ship")
    assert duplicate_rule(a, b) == "same body"


def test_a_body_differing_in_one_word_is_not_a_duplicate() -> None:
    a = skill("deploy", body="1. Build 2. Ship")
    b = skill("release", body="1. Build 2. Test")
    assert duplicate_rule(a, b) is None


def test_names_equal_but_for_a_plural_are_duplicates() -> None:
    assert plural_names("report", "reports")
    assert plural_names("fixes", "fix")
    assert plural_names("policy", "policies")
    assert plural_names("weekly-report", "weekly-reports")
    assert plural_names("branch-notes", "branches-note")
    assert duplicate_rule(skill("policy"), skill("policies")) == "plural name"


def test_names_that_only_look_plural_are_not_duplicates() -> None:
    assert not plural_names("report", "reporter")
    assert not plural_names("go", "gos")
    assert not plural_names("class", "clas")
    assert not plural_names("weekly-report", "monthly-reports")
    assert not plural_names("report", "report")
    assert duplicate_rule(skill("report"), skill("reporter")) is None


def test_descriptions_sharing_seventy_percent_of_words_are_duplicates() -> None:
    # words without stop words: write weekly report board sessions (5) vs
    # write weekly report board session(s) notes (6): 5 shared of 6 = 0.83
    a = skill("weekly", "Write the weekly report from the board and the sessions.")
    b = skill("digest", "Write a weekly report from the board, sessions and notes.")
    assert description_share(a.summary.description, b.summary.description) >= 0.7
    assert duplicate_rule(a, b) == "similar description"


def test_descriptions_sharing_less_than_seventy_percent_are_not() -> None:
    # write weekly report board vs write monthly report board invoices: 3 of 6 = 0.5
    a = skill("weekly", "Write the weekly report from the board.")
    b = skill("monthly", "Write the monthly report from the board and invoices.")
    assert description_share(a.summary.description, b.summary.description) < 0.7
    assert duplicate_rule(a, b) is None


def test_one_word_descriptions_never_match_by_brevity() -> None:
    assert description_share("Deploy.", "Deploy it.") == 0.0


def test_the_keeper_is_the_more_recently_used() -> None:
    old = skill("report", last_used="2026-11-20T00:00:00Z", updated="2026-11-30T00:00:00Z")
    new = skill("reports", last_used="2026-11-28T00:00:00Z", updated="2026-10-01T00:00:00Z")
    [merge] = plan_merges([old, new])
    assert (merge.keeper.name, merge.merged.name) == ("reports", "report")


def test_a_used_skill_keeps_its_place_over_a_newer_never_used_one() -> None:
    used = skill("report", last_used="2026-01-01T00:00:00Z", updated="2026-01-01T00:00:00Z")
    fresh = skill("reports", updated="2026-11-30T00:00:00Z")
    [merge] = plan_merges([fresh, used])
    assert merge.keeper.name == "report"


def test_never_used_skills_are_kept_by_the_later_change() -> None:
    older = skill("fix", updated="2026-11-01T00:00:00Z")
    newer = skill("fixes", updated="2026-11-02T00:00:00Z")
    [merge] = plan_merges([older, newer])
    assert merge.keeper.name == "fixes"


def test_pinned_skills_take_no_part_in_merges() -> None:
    pinned = skill("report", pinned=True, last_used="2026-11-30T00:00:00Z")
    other = skill("reports")
    assert plan_merges([pinned, other]) == []
    assert plan_merges([skill("report"), skill("reports", pinned=True)]) == []


def test_three_twins_merge_into_one_keeper_and_nothing_twice() -> None:
    body = "Same steps."
    a = skill("a-one", body=body, updated="2026-11-03T00:00:00Z")
    b = skill("b-two", body=body, updated="2026-11-02T00:00:00Z")
    c = skill("c-three", body=body, updated="2026-11-01T00:00:00Z")
    merges = plan_merges([c, a, b])
    assert [(m.keeper.name, m.merged.name) for m in merges] == [
        ("a-one", "b-two"),
        ("a-one", "c-three"),
    ]


def test_stale_counts_from_the_last_load() -> None:
    loaded = skill("loaded", last_used="2026-08-01T00:00:00Z", updated="2026-11-30T00:00:00Z")
    recent = skill("recent", last_used="2026-11-01T00:00:00Z", updated="2020-01-01T00:00:00Z")
    found = stale([loaded.summary, recent.summary], NOW, 90)
    assert [s.name for s in found] == ["loaded"]


def test_stale_counts_from_the_last_change_when_never_loaded() -> None:
    old = skill("old", updated="2026-08-01T00:00:00Z")
    new = skill("new", updated="2026-11-01T00:00:00Z")
    pinned = skill("kept", updated="2020-01-01T00:00:00Z", pinned=True)
    found = stale([old.summary, new.summary, pinned.summary], NOW, 90)
    assert [s.name for s in found] == ["old"]
    assert stale([old.summary], NOW, 200) == []
