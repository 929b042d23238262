"""What the command modules share: the home, the runtime, asyncio.run, a question, a count.

The standard library only at the top, as in every module of this package: the parser
is built from these modules, and `habakkuk --help` stays instant.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from habakkuk.engine.home import Home
    from habakkuk.runtime import Runtime

T = TypeVar("T")


def current_home() -> Home:
    """The home the command works on ($HABAKKUK_HOME, else the platform's data folder)."""
    from habakkuk.engine.home import Home, default_home

    return Home(default_home())


async def open_runtime(home: Home | None = None) -> Runtime:
    """The runtime of `home` (default: the user's), opened; the caller closes it."""
    from habakkuk.runtime import Runtime

    return await Runtime.open(home)


def run_async(work: Coroutine[object, object, T]) -> T:
    """Run a command's coroutine to its end (asyncio imported only now: the parser is
    built without it)."""
    import asyncio

    return asyncio.run(work)


def ask(prompt: str) -> str:
    """Ask on the terminal; the answer's line as typed ("" at the end of input)."""
    sys.stdout.write(prompt)
    sys.stdout.flush()
    return sys.stdin.readline()


def count(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value
