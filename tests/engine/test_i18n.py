"""The catalog lookup: language tags, fallbacks, plural forms, placeholders."""

from __future__ import annotations

import pytest

from habakkuk.engine import i18n


@pytest.mark.parametrize(
    ("tag", "base"),
    [("pt-BR", "pt"), ("fr_CA.UTF-8", "fr"), ("de", "de"), ("C", "en"), ("", "en"),
     (None, "en"), ("tlh", "en"), ("zh_CN.UTF-8@pinyin", "zh")],
)  # fmt: skip
def test_a_tag_maps_to_its_shipped_base_language(tag: str | None, base: str) -> None:
    assert i18n.base_language(tag) == base


def test_a_key_missing_everywhere_is_shown_as_itself() -> None:
    assert i18n.t("no.such.key") == "no.such.key"


def test_english_is_the_fallback_for_a_language_without_the_key() -> None:
    with i18n.use_language("tlh"):
        assert i18n.t("common.no_messages") == "This session has no messages yet."
    assert i18n.current_language() == "en"


def test_plural_forms_follow_the_language() -> None:
    assert i18n.plural_form("en", 0) == "other"
    assert i18n.plural_form("fr", 0) == "one"
    assert i18n.plural_form("ja", 1) == "other"
