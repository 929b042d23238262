"""Opening a session of 1,000 messages in the terminal app: time until its last message is
on screen.

The session is built through the real transcript store (the runtime facade's
`seed_session`): turns of a user question, an assistant reply that calls a tool, the
tool's result and the assistant's answer; every tenth answer is long (headings,
paragraphs, a code block, a list, a table). The app runs headless (Textual's test
driver, 80x24) on a temporary home with the offline mock config. Timed: from asking the
chat screen to open the session to the first frame that paints the last message's last
line (the same frame hook as tui_bench.py). Then key press to screen in the composer
(tui_bench's measure), a jump to the top (Home: the first frame that shows the first
message) and back (End: the first frame that shows the last message's last line again).
Targets: the last message on screen in <= 500 ms; Home in <= 150 ms.

Usage: python benchmarks/session_open_bench.py [--messages N] [--runs N] [--presses N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    Frames,
    figures,
    headless_app,
    open_timed,
    shows,
    type_keys,
    until,
    until_ready,
)


def history(count: int) -> list[Any]:
    """`count` messages (rounded down to whole turns of four): the same every run."""
    from habakkuk.engine.llm.types import Message, TextBlock, ToolResultBlock, ToolUseBlock

    messages: list[Any] = []
    turn = 0
    while len(messages) + 4 <= count:
        call = f"call_{turn}"
        messages.append(Message("user", [TextBlock(f"Question {turn}: what is in file {turn}?")]))
        messages.append(
            Message(
                "assistant",
                [
                    TextBlock(f"Let me look at file {turn}."),
                    ToolUseBlock(call, "read_file", {"path": f"notes/file{turn}.md"}),
                ],
            )
        )
        result = "\n".join(f"line {i} of file {turn}" for i in range(20))
        messages.append(Message("user", [ToolResultBlock(call, result)]))
        messages.append(Message("assistant", [TextBlock(answer(turn))]))
        turn += 1
    return messages


def answer(turn: int) -> str:
    """The assistant's answer of `turn`: a long one every tenth turn, else a few lines."""
    if turn % 10 != 9:
        return f"File {turn} holds twenty lines; the first is `line 0 of file {turn}`."
    parts = [f"## Answer {turn}\n"]
    for i in range(40):
        parts.append(f"Paragraph {i} of answer {turn}: " + " ".join(f"w{j}" for j in range(40)))
        if i % 8 == 0:
            parts.append("```python\ndef step():\n    return compute(1, 2)\n```")
        if i % 13 == 0:
            parts.append("- one item\n- another item\n- a third item")
        if i % 17 == 0:
            parts.append("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |")
    return "\n\n".join(parts)


async def open_once(
    count: int, presses: int
) -> tuple[float, list[float], float | None, float | None]:
    """(seconds to the last message on screen, key latencies, seconds to the top shown,
    seconds back to the last message)."""
    from habakkuk.widgets.composer import Composer
    from habakkuk.widgets.markdown_stream import StreamingMarkdown
    from habakkuk.widgets.message_view import MessageView
    from habakkuk.widgets.user_message import UserMessage

    messages = history(count)
    last_text = messages[-1].blocks[-1].text.splitlines()[-1]
    with tempfile.TemporaryDirectory(prefix="habakkuk-open-bench-") as tmp:
        app = headless_app(tmp)
        async with app.run_test(size=(80, 24)) as pilot:
            runtime, chat = await until_ready(app)
            session = await runtime.sessions.new_session(None, origin="bench")
            await runtime.sessions.seed_session(session.id, messages)
            await pilot.pause()
            view = app.screen.query_one(MessageView)
            frames = Frames(app, app.screen.query_one(Composer))

            def last_block() -> Any:
                children = view.children
                reply = children[-1] if children else None
                # Not yet the session's last message (the old view, or not mounted yet).
                if not isinstance(reply, StreamingMarkdown) or last_text not in reply.text:
                    return None
                blocks = reply.blocks()
                return blocks[-1] if blocks else None

            shown_last: list[float] = []

            def watch_last(screen: Any, renderable: Any, now: float) -> None:
                if len(shown_last) == watching[0]:
                    return
                if shows(screen, renderable, last_block()):
                    shown_last.append(now)

            # How many times the last message is looked for (again after End).
            watching = [1]
            frames.hooks.append(watch_last)
            opened = await open_timed(chat, session.id, shown_last, "the last message")
            frames.composer.focus()
            latencies = await type_keys(frames, presses)

            # A jump to the top (Home, as often as it takes while older messages arrive):
            # the first frame that paints the session's first question.
            first_text = messages[0].blocks[0].text
            top: list[float] = []

            def first_shown() -> Any:
                children = view.children
                first = children[0] if children else None
                if isinstance(first, UserMessage) and first_text in str(first.render()):
                    return first
                return None

            def watch_top(screen: Any, renderable: Any, now: float) -> None:
                if not top and shows(screen, renderable, first_shown()):
                    top.append(now)

            frames.hooks.append(watch_top)
            jumped = time.perf_counter()
            deadline = jumped + 60
            while not top and time.perf_counter() < deadline:
                view.scroll_home(animate=False)
                await asyncio.sleep(0.02)
            frames.hooks.remove(watch_top)
            await asyncio.sleep(0.2)
            # Back to the end (End): the last message's last line painted again.
            watching[0] = 2
            ended = time.perf_counter()
            view.page("bottom")
            await until(shown_last, ended + 60, count=2)
            back = shown_last[1] - ended if len(shown_last) > 1 else None
            # Let the app finish what the jump started before it closes (its close is bounded).
            for _ in range(5):
                await pilot.pause()
            await asyncio.sleep(1)
            await app.action_quit()
    return opened, latencies, (top[0] - jumped) if top else None, back


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--presses", type=int, default=20)
    args = parser.parse_args()
    opens: list[float] = []
    tops: list[float] = []
    backs: list[float] = []
    for run in range(args.runs):
        opened, latencies, top, back = asyncio.run(open_once(args.messages, args.presses))
        opens.append(opened)
        top_text = f"{top * 1000:.0f} ms" if top is not None else "never"
        back_text = f"{back * 1000:.0f} ms" if back is not None else "never"
        if top is not None:
            tops.append(top)
        if back is not None:
            backs.append(back)
        print(
            f"run {run + 1}: last message on screen after {opened * 1000:.0f} ms; then key press "
            f"to screen {figures(latencies)}; the first message after Home: {top_text}; "
            f"the last again after End: {back_text}"
        )
        sys.stdout.flush()
    print(
        f"opening a session of {args.messages} messages: last message on screen median "
        f"{statistics.median(opens) * 1000:.0f} ms (min {min(opens) * 1000:.0f}, "
        f"max {max(opens) * 1000:.0f}) over {args.runs} runs; target <= 500 ms"
    )
    if tops:
        print(
            f"  the first message after Home: median {statistics.median(tops) * 1000:.0f} ms "
            f"(max {max(tops) * 1000:.0f}); target <= 150 ms"
        )
    if backs:
        back = statistics.median(backs) * 1000
        print(f"  the last message again after End: median {back:.0f} ms")


if __name__ == "__main__":
    main()
