"""What the command modules share: the home, the runtime, asyncio.run, a question, a count.

The standard library only at the top, as in every module of this package: the parser
is built from these modules, and `habakkuk --help` stays instant.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Iterator

    from habakkuk.engine.home import Home
    from habakkuk.engine.llm.factory import ProviderHub
    from habakkuk.runtime import Runtime

T = TypeVar("T")


def current_home() -> Home:
    """The home the command works on ($HABAKKUK_HOME, else the platform's data folder)."""
    from habakkuk.engine.home import Home, default_home

    return Home(default_home())


async def open_runtime(home: Home | None = None, hub: ProviderHub | None = None) -> Runtime:
    """The runtime of `home` (default: the user's), opened; the caller closes it. `hub`:
    the home's providers on its config, made before (cli/run.py warms a client in it)."""
    from habakkuk.runtime import Runtime

    return await Runtime.open(home, hub=hub)


@contextlib.contextmanager
def collector_held() -> Iterator[Callable[[], None]]:
    """Hold the cyclic garbage collector off while a command starts up: the `started()`
    this yields ends the hold when start-up is over, and leaving the block ends it at the
    latest (an in-process caller gets the collector back as it was).

    Start-up makes a few hundred thousand objects that live as long as the process
    (modules, classes, functions: the model SDK's are most of them), and the collector,
    run every 700 new objects, walked them over and over as they came (180 collections
    in a one-shot `habakkuk run`, 30-50 ms of CPU). `started()` freezes what start-up
    made (never walked again) and turns the collector back on for the work itself."""
    if not gc.isenabled():  # someone else's choice: left alone
        yield lambda: None
        return
    held = True

    def started() -> None:
        nonlocal held
        if held:
            held = False
            gc.freeze()
            gc.enable()

    gc.disable()
    try:
        yield started
    finally:
        if held:
            gc.enable()
        else:
            gc.unfreeze()  # an in-process caller's garbage is collectable again


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
    from habakkuk.engine.i18n import t

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(t("cli.not_a_whole_number", text=repr(text))) from None
    if value < 1:
        raise argparse.ArgumentTypeError(t("cli.at_least_one", value=value))
    return value
