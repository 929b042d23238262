"""Approvals answered at the keyboard while `habakkuk talk` runs.

The loop's turns are submitted attended, so a risky tool call waits for a person: the
request is printed and a line typed on standard input answers it (y, a for always, n,
or any word the chats accept), through the approvals service's one answer path.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from habakkuk.conversation.answers import answer_word
from habakkuk.engine.events import ApprovalAsked

if TYPE_CHECKING:
    from habakkuk.engine.events import EventBus
    from habakkuk.engine.toolkit.approvals import Answer
    from habakkuk.engine.toolkit.waiting import ApprovalsAccess

KEYS: dict[str, Answer] = {"y": "allow_once", "a": "allow_session", "n": "deny"}


def read_answer(line: str) -> Answer | None:
    """What a typed line answers: y/a/n or a word the chats take; None when unclear."""
    word = line.strip().lower()
    return KEYS.get(word) or answer_word(word)


class LineReader:
    """Lines of a readable file descriptor (a terminal, a pipe) without a thread: what is
    there is read when the loop sees it ready (os.read, so no line is left waiting in a
    buffer the loop cannot see)."""

    def __init__(self, stream: TextIO = sys.stdin) -> None:
        self._stream = stream
        self._lines: asyncio.Queue[str] = asyncio.Queue()
        self._pending = b""
        self._fd = -1
        self._ended = False

    def open(self) -> bool:
        """Start reading; False when the stream cannot be watched (not a pipe or a tty)."""
        try:
            fd = self._stream.fileno()
            asyncio.get_running_loop().add_reader(fd, self._ready)
        except (OSError, ValueError, NotImplementedError, AttributeError):
            return False
        self._fd = fd
        return True

    def _ready(self) -> None:
        try:
            data = os.read(self._fd, 4096)
        except OSError:
            data = b""
        if not data:  # end of input: nothing more will be answered here (a deny each)
            self.close()
            self._ended = True
            if self._pending:  # the last line, without its newline
                self._lines.put_nowait(self._pending.decode(errors="replace") + "\n")
            self._lines.put_nowait("")
            return
        *lines, self._pending = (self._pending + data).split(b"\n")
        for line in lines:
            self._lines.put_nowait(line.decode(errors="replace") + "\n")

    async def line(self) -> str:
        """The next line ("" at the end of input, and after it)."""
        if self._ended and self._lines.empty():
            return ""
        return await self._lines.get()

    def close(self) -> None:
        """Stop reading."""
        if self._fd >= 0:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._fd)
            self._fd = -1


async def answer_approvals(
    bus: EventBus,
    approvals: ApprovalsAccess,
    session_id: str,
    reader: LineReader,
    say: Callable[[str], None] = print,
) -> None:
    """Put each approval the session's turns ask to the keyboard, until cancelled."""
    with bus.subscribe(
        lambda e: isinstance(e, ApprovalAsked) and e.request.session == session_id
    ) as asked:
        async for event in asked:
            assert isinstance(event, ApprovalAsked)
            request = event.request
            say(f"? {request.tool}: {request.summary}  allow? [y]es, [a]lways, [n]o")
            while True:
                line = await reader.line()
                answer = read_answer(line) if line else "deny"
                if answer is not None:
                    break
                say("? y, a or n")
            await approvals.respond(event.id, answer, by="terminal")
