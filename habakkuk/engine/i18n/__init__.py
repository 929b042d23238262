"""Habakkuk's own words in every language: one flat YAML catalog per locale.

Every string Habakkuk itself shows a person (command replies and /help, approval
prompts and buttons, pairing notices, errors, the CLI's lines) is a key here:
`t("steer.queued", text=guidance)` looks the key up in the catalog of the language
in use, falls back to English when the key (or the language) is missing, and fills
its named `{placeholders}` with `str.format`, so a translation may put them in any
order. A counted message has `key.one` and `key.other` (and whatever forms the
language's plural rule names, see `plural_form`), chosen by `count=`.

Why flat YAML and not gettext: pyyaml is already a dependency, a catalog is a file a
translator can read and diff, named placeholders survive reordering, and the test that
every catalog has exactly English's keys and placeholders is a dict comparison
(tests/engine/test_i18n_catalogs.py). Catalogs are read on first use, not at import,
so `habakkuk --help` pays nothing.

The language in use is a context variable: a surface sets it (`use_language`) around
what it does for one person (the gateway per channel's `language:`, the terminal and
`habakkuk run` from config.yaml's `language:`, the CLI from LC_ALL/LC_MESSAGES/LANG),
and everything below that calls `t` speaks it without being handed it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path

# The languages that ship a catalog, English first (the one every other falls back to).
LANGUAGES: tuple[str, ...] = ("en", "fr", "es", "pt", "de", "yo", "ar", "zh", "ja", "hi")
DEFAULT = "en"
CATALOGS = Path(__file__).with_name("catalogs")

_current: ContextVar[str] = ContextVar("habakkuk_language", default=DEFAULT)
_TAG = re.compile(r"^([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]+)*(?:\.[\w-]+)?(?:@\w+)?$")


def base_language(tag: str | None) -> str:
    """The shipped language a tag means ("pt-BR" -> "pt", "fr_CA.UTF-8" -> "fr"); English
    for anything unknown or empty ("C", "POSIX", "tlh")."""
    if not tag:
        return DEFAULT
    match = _TAG.match(tag.strip())
    if match is None:
        return DEFAULT
    base = match.group(1).lower()
    return base if base in LANGUAGES else DEFAULT


def current_language() -> str:
    """The language `t` speaks here (English unless a surface set another)."""
    return _current.get()


@contextmanager
def use_language(tag: str | None) -> Iterator[str]:
    """Speak `tag`'s base language inside the block (in this task and those it starts)."""
    token = _current.set(base_language(tag))
    try:
        yield _current.get()
    finally:
        _current.reset(token)


def set_language(tag: str | None) -> str:
    """Speak `tag`'s base language from now on in this context (a CLI command, the
    terminal app's task); returns the language chosen."""
    language = base_language(tag)
    _current.set(language)
    return language


@cache
def catalog(language: str) -> dict[str, str]:
    """The flat key -> text table of `language` (read once); {} when none ships."""
    import yaml

    path = CATALOGS / f"{language}.yaml"
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a catalog is a mapping of keys to texts")
    return {str(key): str(value) for key, value in data.items()}


# English names of the shipped languages (the system prompt names a configured one).
NAMES: dict[str, str] = {
    "en": "English", "fr": "French", "es": "Spanish", "pt": "Portuguese", "de": "German",
    "yo": "Yoruba", "ar": "Arabic", "zh": "Chinese (Simplified)", "ja": "Japanese",
    "hi": "Hindi",
}  # fmt: skip

# The CLDR plural categories each language's catalog gives a counted key (integers only).
# Arabic has six: with only one/other, "2 files" and "11 files" would be ungrammatical.
PLURAL_FORMS: dict[str, tuple[str, ...]] = {
    "ar": ("zero", "one", "two", "few", "many", "other"),
    "zh": ("other",),
    "ja": ("other",),
    "yo": ("other",),
}
_ONE_OTHER = ("one", "other")


def plural_forms(language: str) -> tuple[str, ...]:
    """The plural categories `language`'s catalog has for every counted key."""
    return PLURAL_FORMS.get(language, _ONE_OTHER)


def plural_form(language: str, count: int) -> str:
    """The CLDR plural category of `count` in `language` (one of `plural_forms`):
    French, Portuguese and Hindi count 0 as one; Chinese, Japanese and Yoruba have no
    singular; Arabic has zero, one, two, few (3-10), many (11-99) and other."""
    if language == "ar":
        hundreds = abs(count) % 100
        if count in (0, 1, 2):
            return ("zero", "one", "two")[count]
        if 3 <= hundreds <= 10:
            return "few"
        return "many" if 11 <= hundreds <= 99 else "other"
    if language in ("zh", "ja", "yo"):
        return "other"
    if language in ("fr", "pt", "hi"):
        return "one" if count in (0, 1) else "other"
    return "one" if count == 1 else "other"


def known(key: str) -> bool:
    """Whether English has `key` (a text declared elsewhere in English, a command's
    summary, is looked up only when a catalog carries it)."""
    return key in catalog(DEFAULT)


def language_name(tag: str) -> str:
    """How the system prompt names a configured language: "French (fr-CA)" for a shipped
    one, the tag itself for another (the model may still speak it)."""
    tag = tag.strip()
    match = _TAG.match(tag)
    name = NAMES.get(match.group(1).lower()) if match else None
    return f"{name} ({tag})" if name else tag


def _lookup(key: str, language: str) -> str | None:
    text = catalog(language).get(key)
    if text is None and language != DEFAULT:
        text = catalog(DEFAULT).get(key)
    return text


def t(key: str, /, *, count: int | None = None, language: str | None = None, **args: object) -> str:
    """The text of `key` in the language in use (or `language`), its placeholders filled.

    With `count`, the key's plural form (`key.one`, `key.other`) is chosen and `{count}`
    is available to it. A key no catalog has is a bug; it is shown as itself rather than
    failing what the person asked for.
    """
    language = base_language(language) if language else current_language()
    if count is not None:
        args["count"] = count
        text = _lookup(f"{key}.{plural_form(language, count)}", language)
        if text is None:
            text = _lookup(f"{key}.other", language)
    else:
        text = _lookup(key, language)
    if text is None:
        return key
    try:
        return text.format(**args)
    except (KeyError, IndexError, ValueError):
        # A translation naming a placeholder English does not: English rather than nothing.
        english = catalog(DEFAULT).get(key if count is None else f"{key}.other", key)
        return english.format_map(_Missing(args))


class _Missing(dict[str, object]):
    """format_map's mapping that leaves an unknown placeholder as it was written."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


__all__ = [
    "DEFAULT",
    "LANGUAGES",
    "NAMES",
    "PLURAL_FORMS",
    "base_language",
    "catalog",
    "current_language",
    "known",
    "language_name",
    "plural_form",
    "plural_forms",
    "set_language",
    "t",
    "use_language",
]
