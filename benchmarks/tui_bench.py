"""The terminal app: time to first frame, idle memory, and key latency while a reply streams.

1. First frame and idle RSS: `habakkuk` runs in a pseudo-terminal (80x24) on a
   temporary home with the offline mock config. The first frame is the first
   time the pane shows "starting" (the first screen the app paints, before the
   chat screen and the runtime load); "ready" is when the status line says idle
   (runtime open, workers running). Idle RSS is read from /proc after 2 s idle.
   Targets: first frame <= 0.8 s, idle RSS <= 150 MB.
2. Streaming: the app runs headless (Textual's test driver) while a 20,000-token
   reply is published on the runtime's bus at 200 tokens/s, as a turn's
   `turn.text` events would be. Every 0.25 s a key is pressed in the composer;
   its latency is the time from posting the key to the first frame written
   that paints the composer holding it. Target: under 50 ms.
   The figure printed before this one ("polled") took the composer's text by
   polling from the benchmark's own task and counted the first frame after
   that poll: when the loop was busy the poll saw the key late, after the
   frame that showed it, and the next frame (up to a render interval later)
   was counted instead. It is still printed for comparison.
2b. The same stream beside Textual's own: a bare app (80x24: the reply in an
   anchored VerticalScroll above a TextArea) streams the same reply at the same
   rate once into our StreamingMarkdown (`feed`) and once into a plain Markdown
   widget fed by `Markdown.get_stream()` (MarkdownStream), each in a process of
   its own. Printed for each: key press to screen (the measure of part 2), how
   long after the last token the whole reply was in the document, and the process's
   RSS after the stream and at its peak. It keeps the custom virtualiser proving
   it is worth its coupling to Textual's private names.
3. Opening a long session: a session whose transcript holds --replies long
   assistant replies (2,000-5,000 words each: paragraphs, headings, code
   blocks, lists and tables; seeded through the runtime facade) is opened in
   the headless app (80x24). Printed: the time from asking the chat screen to
   open it to the first frame that paints the last block of its last reply;
   key press to screen latency in the composer afterwards (the exact measure
   of part 2, keys from that first frame on, so work the open leaves for later
   counts); the process's RSS before and after. Then a jump to the top (Home):
   the first frame that shows the first reply (its Markdown source as a draft
   until its blocks exist; before drafts it was blank there) and the first
   frame after its first volume is built.

Usage: python benchmarks/tui_bench.py [--tokens N] [--rate R] [--runs N] [--replies N]
       [--only-stream] (parts 2 and 2b) [--no-compare] (skip 2b)
       [--stream-runs N] (part 2 N times in a row, then each run's p95 and how many
       were under 50 ms)
"""

# The measurement polls widget state and frame times: there is no event to await for them.
# ruff: noqa: ASYNC110

from __future__ import annotations

import argparse
import asyncio
import os
import pty
import select
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import (
    MOCK_CONFIG,
    Frames,
    figures,
    headless_app,
    next_key,
    open_timed,
    placed,
    shows,
    type_keys,
    until,
    until_ready,
)

# -- 1. a real process in a pseudo-terminal --------------------------------------------------


def _command() -> list[str]:
    found = shutil.which("habakkuk", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-c", "from habakkuk.cli import main; main()"]


def start_in_pty(home: Path) -> tuple[subprocess.Popen[bytes], int]:
    import fcntl
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {
        "HABAKKUK_HOME": str(home),
        "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "NO_COLOR": "1",
    }
    process = subprocess.Popen(
        _command(), stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    return process, master


def read_until(master: int, needles: list[bytes], seen: bytearray, deadline: float) -> float:
    """Read the pty until every needle was seen; returns when (perf_counter)."""
    while time.perf_counter() < deadline:
        if all(n in seen for n in needles):
            return time.perf_counter()
        ready, _, _ = select.select([master], [], [], 0.01)
        if ready:
            try:
                seen.extend(os.read(master, 65536))
            except OSError:
                break
    raise SystemExit(f"timed out waiting for {needles!r}")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def first_frame_and_rss(runs: int) -> None:
    frames, readies, rsses = [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="habakkuk-tui-bench-") as tmp:
            home = Path(tmp)
            (home / "config.yaml").write_text(MOCK_CONFIG, encoding="utf-8")
            started = time.perf_counter()
            process, master = start_in_pty(home)
            seen = bytearray()
            try:
                first = read_until(master, [b"starting"], seen, started + 20)
                ready = read_until(master, [b"idle"], seen, started + 30)
                frames.append(first - started)
                readies.append(ready - started)
                # Idle: keep draining output so the app never blocks on a full pty.
                idle_until = time.perf_counter() + 2.0
                while time.perf_counter() < idle_until:
                    if select.select([master], [], [], 0.05)[0]:
                        os.read(master, 65536)
                rsses.append(rss_mb(process.pid))
                os.write(master, b"\x11")  # Ctrl+Q
                deadline = time.perf_counter() + 15
                while process.poll() is None and time.perf_counter() < deadline:
                    if select.select([master], [], [], 0.05)[0]:
                        try:
                            os.read(master, 65536)
                        except OSError:
                            break
            finally:
                if process.poll() is None:
                    process.kill()
                process.wait()
                os.close(master)
    print(
        f"first frame: median {statistics.median(frames) * 1000:.0f} ms "
        f"(min {min(frames) * 1000:.0f}, max {max(frames) * 1000:.0f}) over {runs} runs; "
        f"target <= 800 ms"
    )
    print(f"runtime ready (status idle): median {statistics.median(readies) * 1000:.0f} ms")
    print(f"idle RSS: median {statistics.median(rsses):.0f} MB (max {max(rsses):.0f}); <= 150 MB")


# -- 2. streaming while typing, headless ---------------------------------------------------


def reply_piece(index: int) -> str:
    """Token `index` of the streamed reply: words, a paragraph break every 60, a code block
    every 400."""
    piece = f"word{index} "
    if index % 60 == 59:
        piece += "\n\n"
    if index % 400 == 399:
        piece += "```python\nprint('code block')\n```\n\n"
    return piece


async def streaming_latency(tokens: int, rate: float) -> list[float]:
    from habakkuk.engine.events import TurnEnded, TurnStarted, TurnText
    from habakkuk.widgets.composer import Composer
    from habakkuk.widgets.markdown_stream import StreamingMarkdown

    with tempfile.TemporaryDirectory(prefix="habakkuk-tui-bench-") as tmp:
        app = headless_app(tmp)
        async with app.run_test(size=(80, 24)) as pilot:
            runtime, chat = await until_ready(app)
            session = await runtime.sessions.new_session(None, origin="bench")
            chat.open_session(session.id)
            while chat.session_id != session.id:
                await asyncio.sleep(0.01)
            await pilot.pause()
            composer = app.screen.query_one(Composer)
            frames = Frames(app, composer)
            composer.focus()

            async def stream() -> None:
                runtime.bus.publish(
                    TurnStarted(session=session.id, turn="turn_bench", agent="main")
                )
                interval = 1.0 / rate
                started = time.perf_counter()
                for index in range(tokens):
                    piece = reply_piece(index)
                    runtime.bus.publish(TurnText(session=session.id, turn="turn_bench", text=piece))
                    # Keep the rate steady (catch up after a slow tick, never burst ahead).
                    delay = started + (index + 1) * interval - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                runtime.bus.publish(TurnEnded(session=session.id, turn="turn_bench", status="done"))

            streamer = asyncio.create_task(stream())
            latencies: list[float] = []
            polled: list[float] = []
            typed = ""
            while not streamer.done():
                await asyncio.sleep(0.25)
                typed += next_key(typed)
                posted = frames.press(typed[-1])
                deadline = posted + 5
                while not composer.text.endswith(typed) and time.perf_counter() < deadline:
                    await asyncio.sleep(0.0005)
                held = time.perf_counter()
                latencies.append(await frames.painted(posted, typed))
                # The earlier method also needs a frame after the poll (none may come once
                # the reply has ended: then it has no figure for this key).
                times = frames.times
                while times[-1] < held and time.perf_counter() < posted + 1:
                    await asyncio.sleep(0.0005)
                if times[-1] >= held:
                    polled.append(min(f for f in times if f >= held) - posted)
                if len(typed) > 200:
                    composer.clear()
                    typed = ""
            await streamer
            segments = list(app.screen.query(StreamingMarkdown))
            renders = sum(s.renders for s in segments)
            await app.action_quit()

    print(
        f"streaming {tokens} tokens at {rate:.0f}/s: key press to screen {figures(latencies)} "
        f"over {len(latencies)} presses; target < 50 ms"
    )
    print(f"  (polled, the earlier method: {figures(polled)})")
    sys.stdout.flush()
    print(
        f"markdown renders during the stream: {renders} "
        f"({renders / (tokens / rate):.1f}/s; the 80 ms bound allows 12.5/s)"
    )
    return latencies


def streaming_runs(tokens: int, rate: float, runs: int) -> None:
    """Part 2 `runs` times in a row (each prints its figures), then the p95 of each run."""
    p95s: list[float] = []
    for run in range(runs):
        print(f"run {run + 1} of {runs}:")
        latencies = sorted(asyncio.run(streaming_latency(tokens, rate)))
        p95s.append(latencies[int(len(latencies) * 0.95) - 1])
    if runs > 1:
        shown = ", ".join(f"{p * 1000:.1f}" for p in p95s)
        under = sum(p < 0.050 for p in p95s)
        print(
            f"streaming over {runs} runs: key press to screen p95 per run {shown} ms "
            f"(median {statistics.median(p95s) * 1000:.1f}, max {max(p95s) * 1000:.1f}); "
            f"{under} of {runs} under 50 ms"
        )


# -- 2b. the same stream: our StreamingMarkdown beside Textual's Markdown.get_stream() ------

SIDES = {"ours": "StreamingMarkdown.feed", "textual": "Markdown.get_stream()"}


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def stream_side(side: str, tokens: int, rate: float) -> None:
    """One side of part 2b, in this process: prints one line of figures."""
    from textual.app import App, ComposeResult
    from textual.containers import VerticalScroll
    from textual.widgets import Markdown, TextArea

    from habakkuk.widgets.markdown_stream import StreamingMarkdown

    class Bare(App[None]):
        CSS = "VerticalScroll { height: 1fr; } TextArea { height: 3; }"

        def compose(self) -> ComposeResult:
            with VerticalScroll():
                yield StreamingMarkdown() if side == "ours" else Markdown()
            yield TextArea()

    app = Bare()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.query_one(VerticalScroll).anchor()
        markdown = app.query_one(Markdown)
        composer = app.query_one(TextArea)
        frames = Frames(app, composer)
        composer.focus()
        await pilot.pause()
        ended: list[float] = []

        async def stream() -> None:
            interval = 1.0 / rate
            writer = None if side == "ours" else Markdown.get_stream(markdown)
            started = time.perf_counter()
            for index in range(tokens):
                piece = reply_piece(index)
                if isinstance(markdown, StreamingMarkdown):
                    markdown.feed(piece)
                elif writer is not None:
                    await writer.write(piece)
                delay = started + (index + 1) * interval - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            ended.append(time.perf_counter())
            # Until the whole reply is in the document.
            if isinstance(markdown, StreamingMarkdown):
                await markdown.finish()
            elif writer is not None:
                await writer.stop()

        streamer = asyncio.create_task(stream())
        latencies = await keys_while(frames, composer, streamer)
        await streamer
        whole = time.perf_counter()
        await pilot.pause()
        rss = self_rss_mb()
        await app.action_quit()
    print(
        f"  {SIDES[side]:<24} key press to screen {figures(latencies)} over {len(latencies)}"
        f" presses; all in the document {(whole - ended[0]) * 1000:.0f} ms after the last token;"
        f" RSS {rss:.0f} MB after, peak {peak_rss_mb():.0f} MB"
    )


async def keys_while(frames: Frames, composer: Any, streamer: asyncio.Task[None]) -> list[float]:
    """Press a key every 0.25 s until `streamer` is done; each one's latency to the screen."""
    latencies: list[float] = []
    typed = ""
    while not streamer.done():
        await asyncio.sleep(0.25)
        typed += next_key(typed)
        latencies.append(await frames.painted(frames.press(typed[-1]), typed))
        if len(typed) > 200:
            composer.clear()
            typed = ""
    return latencies


def compare_streaming(tokens: int, rate: float) -> None:
    """Part 2b: each side in a process of its own (so RSS is its own)."""
    print(f"streaming {tokens} tokens at {rate:.0f}/s in a bare app, ours beside Textual's:")
    sys.stdout.flush()
    for side in SIDES:
        command = [sys.executable, __file__, "--side", side]
        command += ["--tokens", str(tokens), "--rate", str(rate)]
        subprocess.run(command, check=True)


# -- 3. opening a session with long replies, headless -------------------------------------------


def long_reply(number: int) -> str:
    """A reply of 2,000-5,000 words with the blocks a model writes: the same text every run."""
    import random

    rng = random.Random(number)
    words = rng.randint(2_000, 5_000)
    parts: list[str] = [f"## Reply {number}\n"]
    written = 0
    paragraph = 0
    while written < words:
        paragraph += 1
        count = rng.randint(30, 90)
        text = " ".join(f"word{number}x{written + i}" for i in range(count))
        if paragraph % 5 == 0:
            text += " with a [link](https://example.com/page) and `inline code`"
        parts.append(text + "\n")
        written += count
        if paragraph % 6 == 0:
            lines = [f"    value_{i} = compute({i}, {paragraph})" for i in range(8)]
            parts.append("```python\ndef step():\n" + "\n".join(lines) + "\n```\n")
            written += 40
        if paragraph % 7 == 0:
            items = [f"- item {i}: word{i} and more words" for i in range(5)]
            parts.append("\n".join(items) + "\n")
            written += 30
        if paragraph % 11 == 0:
            rows = [f"| name{i} | {i * 3} | {i % 2 == 0} | note {i} |" for i in range(6)]
            header = "| name | size | even | note |\n|---|---|---|---|\n"
            parts.append(header + "\n".join(rows) + "\n")
            written += 40
        if paragraph % 10 == 0:
            parts.append(f"### Section {paragraph // 10}\n")
    parts.append(f"End of reply {number}.\n")
    return "\n".join(parts)


def self_rss_mb() -> float:
    import gc

    gc.collect()
    return rss_mb(os.getpid())


async def open_long_session(replies: int, presses: int) -> None:
    from habakkuk.widgets.composer import Composer
    from habakkuk.widgets.markdown_stream import MarkdownVolume, StreamingMarkdown
    from habakkuk.widgets.message_view import MessageView

    with tempfile.TemporaryDirectory(prefix="habakkuk-tui-bench-") as tmp:
        app = headless_app(tmp)
        async with app.run_test(size=(80, 24)) as pilot:
            runtime, chat = await until_ready(app)
            session = await runtime.sessions.new_session(None, origin="bench")
            history: list[tuple[str, str]] = []
            words = 0
            for number in range(replies):
                history.append(("user", f"Question {number}: tell me more."))
                reply = long_reply(number)
                words += len(reply.split())
                history.append(("assistant", reply))
            await runtime.sessions.seed_session(session.id, history)
            await pilot.pause()
            rss_before = self_rss_mb()
            view = app.screen.query_one(MessageView)
            frames = Frames(app, app.screen.query_one(Composer))

            def last_block() -> Any:
                children = view.children
                reply = children[-1] if children else None
                if not isinstance(reply, StreamingMarkdown):
                    return None
                blocks = reply.blocks()
                return blocks[-1] if blocks else None

            shown_last: list[float] = []

            def watch_last(screen: Any, renderable: Any, now: float) -> None:
                """The first frame that paints the last block of the last reply."""
                if shown_last:
                    return
                if shows(screen, renderable, last_block()):
                    shown_last.append(now)

            frames.hooks.append(watch_last)
            opened = await open_timed(chat, session.id, shown_last, "the last reply")
            frames.composer.focus()
            latencies = await type_keys(frames, presses)
            rss_after = self_rss_mb()

            # A jump to the top: when the first reply's text is on screen (its source as a
            # draft, until its blocks exist), and when its first volume is built.
            first_reply = next(c for c in view.children if isinstance(c, StreamingMarkdown))
            top_text: list[float] = []
            top_built: list[float] = []

            def watch_top(screen: Any, renderable: Any, now: float) -> None:
                if not top_text and placed(screen, first_reply):
                    top_text.append(now)
                volumes = [c for c in first_reply.children if isinstance(c, MarkdownVolume)]
                if not top_built and volumes and volumes[0].built:
                    top_built.append(now)

            frames.hooks.append(watch_top)
            jumped = time.perf_counter()
            view.scroll_home(animate=False)
            await until(top_built, jumped + 30)
            await app.action_quit()

    print(
        f"opening a session of {replies} long replies ({words} words): last reply on screen "
        f"after {opened * 1000:.0f} ms"
    )
    print(f"  then key press to screen: {figures(latencies)} over {len(latencies)} presses")
    print(f"  RSS: {rss_before:.0f} MB before opening, {rss_after:.0f} MB after the presses")
    if top_text and top_built:
        print(
            f"  a jump to the top: its text on screen after {(top_text[0] - jumped) * 1000:.0f} ms,"
            f" rendered after {(top_built[0] - jumped) * 1000:.0f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--stream-runs", type=int, default=1, help="part 2 this many times in a row"
    )
    parser.add_argument("--skip-stream", action="store_true")
    parser.add_argument("--replies", type=int, default=40, help="part 3; 0 skips it")
    parser.add_argument("--presses", type=int, default=40)
    parser.add_argument("--only-history", action="store_true", help="run part 3 only")
    parser.add_argument("--only-stream", action="store_true", help="run parts 2 and 2b only")
    parser.add_argument("--no-compare", action="store_true", help="skip part 2b")
    parser.add_argument("--side", choices=sorted(SIDES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        asyncio.run(stream_side(args.side, args.tokens, args.rate))
        return
    if args.only_stream:
        streaming_runs(args.tokens, args.rate, args.stream_runs)
        if not args.no_compare:
            compare_streaming(args.tokens, args.rate)
        return
    if not args.only_history:
        first_frame_and_rss(args.runs)
        if not args.skip_stream:
            streaming_runs(args.tokens, args.rate, args.stream_runs)
            if not args.no_compare:
                compare_streaming(args.tokens, args.rate)
    if args.replies:
        asyncio.run(open_long_session(args.replies, args.presses))


if __name__ == "__main__":
    main()
