"""The language of one CLI invocation: config.yaml's `language:`, else the locale.

Chosen after argparse has parsed the words, so `habakkuk --help` (answered by argparse,
in English) pays nothing; choosing costs one small file read (no YAML parse, see
habakkuk.engine.i18n.locale).
"""

from __future__ import annotations

import os
from collections.abc import Mapping


def cli_language(environ: Mapping[str, str] | None = None) -> str:
    """The tag this invocation speaks: the home's config.yaml `language:`, else LC_ALL,
    LC_MESSAGES, LANG (a tag for habakkuk.engine.i18n.base_language; "" is English)."""
    environ = os.environ if environ is None else environ
    from habakkuk.engine.errors import HabakkukError
    from habakkuk.engine.home import default_home
    from habakkuk.engine.i18n.locale import config_language, locale_language

    try:
        home = default_home()
    except HabakkukError:
        home = None  # a bad $HABAKKUK_HOME: the command says so, in the locale's words
    if home is not None:
        chosen = config_language(home / "config.yaml")
        if chosen:
            return chosen
    return locale_language(environ)
