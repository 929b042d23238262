"""A code fence that is still streaming."""

from __future__ import annotations

import threading
from typing import Any

from textual.widgets.markdown import MarkdownFence


class StreamingFence(MarkdownFence):
    """A code fence still streaming: without a language, no guessing (it is done once, when
    the fence is finished, exactly as a one-shot render does)."""

    @classmethod
    def highlight(cls, code: str, language: str, ansi: bool = False, dark: bool = False) -> Any:
        if not language:
            _warm_lexers()
            language = "text"
        return super().highlight(code, language, ansi, dark)


_lexers_warm = False


def _warm_lexers() -> None:
    """Guessing a fence's language imports every Pygments lexer the first time (a few
    hundred ms): do that on a thread while the fence still streams."""
    global _lexers_warm
    if _lexers_warm:
        return
    _lexers_warm = True

    def warm() -> None:
        from pygments.lexers import guess_lexer

        guess_lexer("x = 1\n")

    threading.Thread(target=warm, name="habakkuk-lexers", daemon=True).start()


# Fence languages a model writes most; the first fence of each compiles its lexer's rules.
COMMON_LANGUAGES = ("python", "bash", "json", "yaml", "javascript", "typescript", "diff", "sql")
_common_warm = False


def warm_common_lexers() -> None:
    """The first fence in a language compiles its Pygments lexer's rules (Python's: ~200 ms
    on the event loop, when a session whose last reply holds code opens): compile the common
    ones on a thread at start instead (once a process)."""
    global _common_warm
    if _common_warm:
        return
    _common_warm = True

    def warm() -> None:
        from pygments.lexers import get_lexer_by_name
        from pygments.util import ClassNotFound

        for language in COMMON_LANGUAGES:
            try:
                get_lexer_by_name(language)
            except ClassNotFound:
                continue

    threading.Thread(target=warm, name="habakkuk-common-lexers", daemon=True).start()
