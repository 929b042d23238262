"""Every shipped catalog says exactly what English says: same keys, same placeholders,
the plural forms its language counts with, and a first line owning up to machine
translation."""

from __future__ import annotations

import string

import pytest

from habakkuk.engine import i18n
from habakkuk.engine.errors import HabakkukError, NotFound, shown
from habakkuk.engine.i18n import CATALOGS, DEFAULT, LANGUAGES, catalog, plural_forms

OTHERS = [language for language in LANGUAGES if language != DEFAULT]


def placeholders(text: str) -> set[str]:
    """The `{names}` a text fills (ValueError for a stray brace)."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def counted() -> set[str]:
    """English's counted keys: the bases that have both `.one` and `.other`."""
    english = catalog(DEFAULT)
    return {
        key.removesuffix(".one")
        for key in english
        if key.endswith(".one") and key.removesuffix(".one") + ".other" in english
    }


def expected_keys(language: str) -> set[str]:
    """English's keys, a counted one with the forms `language` counts with instead."""
    bases = counted()
    plain = {key for key in catalog(DEFAULT) if key.rpartition(".")[0] not in bases}
    return plain | {f"{base}.{form}" for base in bases for form in plural_forms(language)}


def test_every_shipped_language_has_a_catalog_that_parses() -> None:
    assert sorted(path.stem for path in CATALOGS.glob("*.yaml")) == sorted(LANGUAGES)
    for language in LANGUAGES:
        assert catalog(language), language


@pytest.mark.parametrize("language", OTHERS)
def test_a_catalog_has_exactly_englishs_keys_with_its_plural_forms(language: str) -> None:
    have = set(catalog(language))
    want = expected_keys(language)
    assert sorted(want - have) == [], f"{language}.yaml lacks these keys"
    assert sorted(have - want) == [], f"{language}.yaml has keys English does not"


@pytest.mark.parametrize("language", OTHERS)
def test_a_catalog_fills_the_same_placeholders_as_english(language: str) -> None:
    english, translated = catalog(DEFAULT), catalog(language)
    bases = counted()
    for key, text in translated.items():
        base, _, form = key.rpartition(".")
        if base in bases:
            # A form may leave the number out ("your last message"); the rest stays.
            want = placeholders(english[f"{base}.other"]) | placeholders(english[f"{base}.one"])
            assert placeholders(text) - {"count"} == want - {"count"}, f"{language}: {key}"
            if form == "other":
                assert "count" in placeholders(text), f"{language}: {key} hides the number"
        else:
            assert placeholders(text) == placeholders(english[key]), f"{language}: {key}"


@pytest.mark.parametrize("language", OTHERS)
def test_a_non_english_catalog_says_it_is_machine_translated(language: str) -> None:
    first = (CATALOGS / f"{language}.yaml").read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("#") and "machine-translated" in first.lower()


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_count_picks_a_form_the_catalog_has(language: str) -> None:
    forms = set(plural_forms(language))
    assert {i18n.plural_form(language, n) for n in range(0, 1200)} == forms


@pytest.mark.parametrize(
    ("count", "form"),
    [(0, "zero"), (1, "one"), (2, "two"), (3, "few"), (10, "few"), (11, "many"), (99, "many"),
     (100, "other"), (103, "few"), (111, "many"), (200, "other")],
)  # fmt: skip
def test_arabic_counts_with_six_forms(count: int, form: str) -> None:
    assert i18n.plural_form("ar", count) == form


def test_a_counted_key_is_said_in_the_form_the_count_needs() -> None:
    with i18n.use_language("fr"):
        assert i18n.t("commands.usage.web_searches", count=0) == "0 recherche web"
        assert i18n.t("commands.usage.web_searches", count=2) == "2 recherches web"
    with i18n.use_language("ja"):
        assert "3" in i18n.t("commands.usage.web_searches", count=3)


def test_a_said_error_is_english_as_text_and_the_persons_language_when_shown() -> None:
    # English in logs and tool results (str), the chat's language in a command's reply.
    error = NotFound.said("errors.sessions.not_found", session="'ses_x'")
    with i18n.use_language("fr"):
        assert str(error) == "session 'ses_x' not found"
        assert shown(error) == "session 'ses_x' introuvable"
    assert shown(HabakkukError("plain words")) == "plain words"
