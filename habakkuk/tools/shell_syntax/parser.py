"""Shell parser: tokens into lists of pipelines of simple commands and groups.

The grammar is a forgiving subset of POSIX/bash: lists separated by ``;``,
``&``, ``&&``, ``||`` and newlines; pipelines joined by ``|`` and ``|&``;
subshells ``( ... )`` and brace groups ``{ ...; }``; simple commands with
their words and redirections. Compound commands (``if``, ``for``, ``while``,
``case``) are not given a structure of their own: their reserved words stay
in the simple commands (see :func:`habakkuk.tools.shell_syntax.commands.resolve`),
which is enough to find every command they run. Function definitions keep
their bodies as groups.

The parser never raises; nesting deeper than :data:`MAX_GROUP_DEPTH` is read
flat. Substitution bodies are kept as text on their words: parse them with
:func:`parse` when they matter.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field

from habakkuk.tools.shell_syntax.lexer import (
    Operator,
    Redirect,
    RedirectToken,
    Token,
    Word,
    tokenize,
)

__all__ = [
    "MAX_GROUP_DEPTH",
    "Element",
    "Group",
    "Pipeline",
    "SimpleCommand",
    "is_bare_word",
    "parse",
    "simple_commands",
    "walk_simple_commands",
]

MAX_GROUP_DEPTH = 64

SEPARATORS = frozenset({";", "&", "&&", "||", "\n", ";;", ";&", ";;&"})
PIPES = frozenset({"|", "|&"})


@dataclass(eq=False)
class SimpleCommand:
    """Words (assignments, reserved words and wrappers included) and redirections.

    Compared and hashed by identity, so that results about one command can be cached.
    """

    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)


@dataclass
class Group:
    """A subshell ``( ... )`` or brace group ``{ ...; }``: a list of pipelines."""

    body: list[Pipeline]
    subshell: bool = False


Element = SimpleCommand | Group


@dataclass
class Pipeline:
    """Elements joined by pipes, each one's stdout feeding the next one's stdin."""

    commands: list[Element]
    # The operator that ends the pipeline (";", "&", "&&", "||", newline) or "" at the end.
    separator: str = ""


def is_bare_word(tok: Token, value: str) -> bool:
    """Whether ``tok`` is the unquoted word ``value`` (as reserved words must be)."""
    return isinstance(tok, Word) and not tok.quoted and tok.value == value


class _Parser:
    """Recursive descent over tokens into pipelines of simple commands and groups."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.depth = 0

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def parse_list(self, closer: str | None = None) -> list[Pipeline]:
        pipelines: list[Pipeline] = []
        while (tok := self.peek()) is not None:
            if isinstance(tok, Operator) and tok.value in SEPARATORS | PIPES:
                self.pos += 1
                if pipelines and not pipelines[-1].separator:
                    pipelines[-1].separator = tok.value
                continue
            if isinstance(tok, Operator) and tok.value == ")":
                self.pos += 1
                if closer == ")":
                    return pipelines
                continue  # stray ')' (e.g. a case pattern)
            if closer == "}" and is_bare_word(tok, "}"):
                self.pos += 1
                return pipelines
            pipelines.append(self.parse_pipeline(closer))
        return pipelines

    def parse_pipeline(self, closer: str | None) -> Pipeline:
        elements: list[Element] = [self.parse_element(closer)]
        while (tok := self.peek()) is not None and isinstance(tok, Operator) and tok.value in PIPES:
            self.pos += 1
            elements.append(self.parse_element(closer))
        return Pipeline(elements)

    @staticmethod
    def _opens(tok: Token | None) -> bool:
        """Whether `tok` opens a group: a subshell's "(" or a brace group's "{"."""
        return (isinstance(tok, Operator) and tok.value == "(") or (
            tok is not None and is_bare_word(tok, "{")
        )

    def parse_element(self, closer: str | None) -> Element:
        tok = self.peek()
        opener = ")" if isinstance(tok, Operator) and tok.value == "(" else None
        if tok is not None and is_bare_word(tok, "{"):
            opener = "}"
        if opener is not None:
            self.pos += 1
            if self.depth >= MAX_GROUP_DEPTH:
                # Too deep to nest further: a run of openers here stands for one empty
                # command (a line of a million "(" made a million, each walked by every
                # check); what follows them is read flat at this depth, as before.
                while self._opens(self.peek()):
                    self.pos += 1
                return SimpleCommand()
            self.depth += 1
            try:
                return Group(self.parse_list(opener), subshell=opener == ")")
            finally:
                self.depth -= 1
        simple = SimpleCommand()
        while (tok := self.peek()) is not None:
            if isinstance(tok, Operator):
                break
            if closer == "}" and not simple.words and is_bare_word(tok, "}"):
                break
            self.pos += 1
            if isinstance(tok, RedirectToken):
                simple.redirects.append(tok.redirect)
            else:
                simple.words.append(tok)
        return simple


@functools.lru_cache(maxsize=256)
def _parse_cached(text: str) -> tuple[Pipeline, ...]:
    return tuple(_Parser(tokenize(text)).parse_list())


def parse(text: str) -> list[Pipeline]:
    """Parse shell text into its pipelines, in order.

    Results are cached (callers often reparse the same nested text); treat the
    returned structure as read-only.
    """
    return list(_parse_cached(text))


def simple_commands(element: Element) -> list[SimpleCommand]:
    """All simple commands inside an element, groups flattened."""
    found: list[SimpleCommand] = []
    _collect_simple(element, found)
    return found


def _collect_simple(element: Element, found: list[SimpleCommand]) -> None:
    # Into one list: a list built at every level copied each command once per group
    # around it (64 copies of each at the deepest nesting).
    if isinstance(element, SimpleCommand):
        found.append(element)
        return
    for pipeline in element.body:
        for inner in pipeline.commands:
            _collect_simple(inner, found)


def walk_simple_commands(pipelines: list[Pipeline]) -> Iterator[SimpleCommand]:
    """Every simple command in the pipelines, groups flattened (substitutions not entered)."""
    for pipeline in pipelines:
        for element in pipeline.commands:
            yield from simple_commands(element)
