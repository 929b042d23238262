"""Shell syntax: lex, parse and expand shell text into the commands it runs.

A static reading of shell text (nothing is executed, no variable is known),
for checks that must see what ``sh -c TEXT`` or a shell script would run:
the hardline blocklist (:mod:`habakkuk.tools.hardline`) and scans of scripts.

* :mod:`~habakkuk.tools.shell_syntax.lexer`: :func:`tokenize` into
  :class:`Word`, :class:`Operator` and :class:`RedirectToken` (quotes,
  escapes, here-documents, substitutions kept on their words).
* :mod:`~habakkuk.tools.shell_syntax.parser`: :func:`parse` into
  :class:`Pipeline` lists of :class:`SimpleCommand` and :class:`Group`.
* :mod:`~habakkuk.tools.shell_syntax.expand`: :func:`expand_words` (brace
  expansion, ``$IFS`` splitting).
* :mod:`~habakkuk.tools.shell_syntax.commands`: :func:`resolve` (the argv a
  simple command runs once ``sudo``, ``env``, ``nice``, ``xargs``... are
  peeled off), :func:`invocation` and :func:`shell_code` (where a shell or an
  interpreter takes its program from).

Example::

    for pipeline in parse("cd /tmp && sudo rm -rf {a,b}"):
        for simple in walk_simple_commands([pipeline]):
            resolved = resolve(expand_words(simple.words))
            if resolved and resolved.argv:
                print([w.value for w in resolved.argv])   # ['cd', '/tmp'], ['rm', '-rf', 'a', 'b']
"""

from habakkuk.tools.shell_syntax.commands import (
    SHELLS,
    STDIN_PATHS,
    Invocation,
    Resolved,
    XargsInput,
    basename,
    invocation,
    is_assignment,
    is_interpreter,
    resolve,
    shell_code,
    skip_options,
)
from habakkuk.tools.shell_syntax.expand import brace_expand, expand_words
from habakkuk.tools.shell_syntax.lexer import (
    Operator,
    Redirect,
    RedirectToken,
    Token,
    Word,
    tokenize,
)
from habakkuk.tools.shell_syntax.parser import (
    Element,
    Group,
    Pipeline,
    SimpleCommand,
    parse,
    simple_commands,
    walk_simple_commands,
)

__all__ = [
    "SHELLS",
    "STDIN_PATHS",
    "Element",
    "Group",
    "Invocation",
    "Operator",
    "Pipeline",
    "Redirect",
    "RedirectToken",
    "Resolved",
    "SimpleCommand",
    "Token",
    "Word",
    "XargsInput",
    "basename",
    "brace_expand",
    "expand_words",
    "invocation",
    "is_assignment",
    "is_interpreter",
    "parse",
    "resolve",
    "shell_code",
    "simple_commands",
    "skip_options",
    "tokenize",
    "walk_simple_commands",
]
