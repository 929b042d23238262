"""What the benchmarks share: a home with the offline mock config, the terminal app
headless on it, and its frames as a terminal write would encode them.

Headless apps (Textual's test driver) skip the terminal write: `Frames` does the same
encoding work on each frame and notes when it was ready, so a benchmark can time the
first frame that paints what it waits for. Textual has no event for a frame, so the
benchmarks poll (each says `ruff: noqa: ASYNC110`). Textual is imported only inside
the functions: some benchmarks (big_home.py) never start the app.

Run as scripts (`python benchmarks/x.py`), the benchmarks find this module beside them.
"""

# The measurements watch frames and widget state: there is no event to await for them.
# ruff: noqa: ASYNC110

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any


def mock_config(
    *agents: str,
    model: str = "mock/demo",
    mode: str = "ask",
    timezone: str | None = None,
    extra: str = "",
) -> str:
    """A config.yaml of the offline mock provider and `agents` (default: main), each on
    `model` in `mode`; `extra` (whole YAML sections) is added at the end."""
    lines = ["providers:", "  mock:", "    type: mock", "agents:"]
    for agent in agents or ("main",):
        lines += [f"  {agent}:", f"    model: {model}", f"    mode: {mode}"]
    if timezone:
        lines.append(f"timezone: {timezone}")
    return "\n".join(lines) + "\n" + extra


MOCK_CONFIG = mock_config()


def fresh_home(root: Path | str, config: str = MOCK_CONFIG) -> Any:
    """A prepared home at `root` whose config.yaml is `config`."""
    from habakkuk.engine.home import Home

    home = Home(Path(root))
    home.prepare()
    home.config_path.write_text(config, encoding="utf-8")
    return home


def headless_app(root: Path | str, config: str | None = MOCK_CONFIG) -> Any:
    """The app (not started yet) on a fresh home at `root` with `config`, or on the home
    already there when `config` is None."""
    from habakkuk.app import HabakkukApp
    from habakkuk.engine.home import Home

    home = Home(Path(root)) if config is None else fresh_home(root, config)
    return HabakkukApp(home, animate=False)


async def until_ready(app: Any) -> tuple[Any, Any]:
    """(runtime, chat screen) once the app has opened its runtime."""
    while app.runtime is None or app.get_chat() is None:
        await asyncio.sleep(0.01)
    return app.runtime, app.get_chat()


@asynccontextmanager
async def running(app: Any, size: tuple[int, int]) -> AsyncIterator[Any]:
    """The app running headless at `size` with its runtime open; yields the pilot."""
    async with app.run_test(size=size) as pilot:
        await until_ready(app)
        yield pilot


def paints(update: Any, region: Any) -> bool:
    """Whether a compositor update repaints any cell of `region`."""
    from textual._compositor import ChopsUpdate, LayoutUpdate

    if isinstance(update, LayoutUpdate):
        return bool(update.region.overlaps(region))
    if isinstance(update, ChopsUpdate):
        lines = range(region.y, region.bottom)
        return any(y in lines and x1 < region.right and x2 > region.x for y, x1, x2 in update.spans)
    return False


def placed(screen: Any, widget: Any) -> Any:
    """Where the frame just rendered placed `widget` (None: not on screen)."""
    return screen._compositor.visible_widgets.get(widget) if widget is not None else None


def shows(screen: Any, update: Any, widget: Any) -> bool:
    """Whether this frame paints the visible part of `widget`."""
    where = placed(screen, widget)
    return where is not None and paints(update, where[0].intersection(where[1]))


Hook = Callable[[Any, Any, float], None]


class Frames:
    """The app's frames as they are ready for the terminal.

    Each frame is encoded as a terminal write would be (while `encode()` says so), and
    noted; with a `composer`, what it held when a frame painted it. `hooks` run on every
    encoded frame with (screen, update, time).
    """

    def __init__(
        self, app: Any, composer: Any = None, encode: Callable[[], bool] = lambda: True
    ) -> None:
        from textual._compositor import CompositorUpdate

        self.app = app
        self.composer = composer
        self.times: list[float] = []
        self.composer_frames: list[tuple[float, str]] = []
        self.hooks: list[Hook] = []
        original_display = app._display

        def display(screen: Any, renderable: Any) -> None:
            original_display(screen, renderable)
            if isinstance(renderable, CompositorUpdate) and encode():
                renderable.render_segments(app.console)
                now = time.perf_counter()
                self.times.append(now)
                if composer is not None and shows(screen, renderable, composer):
                    self.composer_frames.append((now, composer.text))
                for hook in self.hooks:
                    hook(screen, renderable, now)

        app._display = display

    def shown(self, posted: float, typed: str) -> float | None:
        """When the first frame after `posted` painted the composer holding `typed`."""
        for when, text in self.composer_frames[-200:]:
            if when >= posted and text.endswith(typed):
                return when
        return None

    def press(self, char: str) -> float:
        """Deliver a key as the terminal driver does (what Pilot.press does, minus its
        waits); returns when it was posted."""
        from textual import events

        posted = time.perf_counter()
        key = events.Key(char, char)
        key.set_sender(self.app)
        self.app._driver.send_message(key)
        return posted

    async def painted(self, posted: float, typed: str) -> float:
        """Seconds from `posted` to the first frame showing the composer holding `typed`."""
        deadline = posted + 5
        while self.shown(posted, typed) is None and time.perf_counter() < deadline:
            await asyncio.sleep(0.0005)
        painted = self.shown(posted, typed)
        if painted is None:
            raise SystemExit("a key press never reached the screen")
        return painted - posted


def next_key(typed: str) -> str:
    """The key to type after `typed`: y and x in turn (so each press changes the text)."""
    return "x" if len(typed) % 2 else "y"


async def type_keys(frames: Frames, presses: int, pause: float = 0.1) -> list[float]:
    """Type `presses` keys in the composer, `pause` seconds apart; each one's latency to
    the screen."""
    latencies: list[float] = []
    typed = ""
    for _ in range(presses):
        await asyncio.sleep(pause)
        typed += next_key(typed)
        latencies.append(await frames.painted(frames.press(typed[-1]), typed))
    return latencies


async def until(seen: list[float], deadline: float, count: int = 1) -> None:
    """Wait until `seen` holds `count` times, or the deadline passes."""
    while len(seen) < count and time.perf_counter() < deadline:
        await asyncio.sleep(0.001)


async def first_paints(
    app: Any,
    pilot: Any,
    make_screen: Callable[[], Any],
    table_of: Callable[[Any], Any],
    runs: int,
    *,
    what: str,
    timeout: float = 30.0,
    check: Callable[[Any], None] = lambda screen: None,
    first_frames: list[float] | None = None,
) -> list[float]:
    """Push a new screen `runs` times; each time, the seconds from the push to the first
    frame that paints its table (`table_of(screen)`) holding rows. `check(screen)` runs
    after each paint; `first_frames` gets the seconds to each screen's first frame.
    Frames are encoded only while a paint is awaited."""
    painted: list[float] = []
    first: list[float] = []  # the screen's first frame, the list empty or not
    watching: list[Any] = []

    def watch(screen: Any, update: Any, now: float) -> None:
        table = watching[0]
        if not first and screen is table.screen:
            first.append(now)
        if placed(screen, table) is not None and table.row_count > 0:
            painted.append(now)

    frames = Frames(app, encode=lambda: bool(watching) and not painted)
    frames.hooks.append(watch)
    times: list[float] = []
    for _ in range(runs):
        screen = make_screen()
        painted.clear()
        first.clear()
        watching.clear()
        pushed = time.perf_counter()
        await app.push_screen(screen)
        watching[:] = [table_of(screen)]
        await until(painted, pushed + timeout)
        if not painted:
            raise SystemExit(f"{what} never reached the screen")
        check(screen)
        times.append(painted[0] - pushed)
        if first_frames is not None:
            first_frames.append((first or painted)[0] - pushed)
        await app.pop_screen()
        await pilot.pause()
    return times


def milliseconds(values: list[float]) -> str:
    """Each value in ms, comma-separated."""
    return ", ".join(f"{value * 1000:.0f}" for value in values)


def paint_summary(name: str, times: list[float], target_ms: int = 150) -> str:
    """`NAME, push to first paint: median M ms, worst W ms (target <= T ms)`."""
    return (
        f"{name}: median {statistics.median(times) * 1000:.0f} ms, worst "
        f"{max(times) * 1000:.0f} ms (target <= {target_ms} ms)"
    )


def figures(values: list[float]) -> str:
    """Median, p95 and max of latencies, in ms."""
    values = sorted(values)
    p95 = values[int(len(values) * 0.95) - 1]
    return (
        f"median {statistics.median(values) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, "
        f"max {max(values) * 1000:.1f} ms"
    )


async def open_timed(chat: Any, session_id: str, seen: list[float], what: str) -> float:
    """Ask the chat screen to open a session; the seconds until a frame hook notes in
    `seen` that `what` is on screen."""
    asked = time.perf_counter()
    chat.open_session(session_id)
    await until(seen, asked + 120)
    if not seen:
        raise SystemExit(f"{what} never reached the screen")
    return seen[0] - asked


async def screen_first_paints(
    make_screen: Callable[[], Any],
    table_of: Callable[[Any], Any],
    runs: int,
    *,
    size: tuple[int, int],
    what: str,
    config: str = MOCK_CONFIG,
    before: Callable[[Any], None] = lambda home: None,
    seed: Callable[[Any], Any] | None = None,
    check: Callable[[Any], None] = lambda screen: None,
    first_frames: list[float] | None = None,
) -> list[float]:
    """`first_paints` of a screen on a fresh home with `config`: `before(home)` runs
    before the app starts, `seed(runtime)` (awaited) once its runtime is open."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="habakkuk-screen-bench-") as tmp:
        app = headless_app(tmp, config)
        before(app.home)
        async with running(app, size) as pilot:
            if seed is not None:
                await seed(app.runtime)
            return await first_paints(
                app,
                pilot,
                make_screen,
                table_of,
                runs,
                what=what,
                check=check,
                first_frames=first_frames,
            )


def turns_config(concurrency: int) -> str:
    """The turn benchmarks' config: the mock provider answering "ok", `concurrency` turns
    at a time."""
    return (
        '\nproviders:\n  mock: {type: mock, script: ["ok"]}\n'
        "agents:\n  main: {model: mock/bench, mode: read-only}\n"
        f"workers:\n  turns: {concurrency}\n"
    )


# The big home's agents (benchmarks/big_home.py) on the mock provider, with the web chat's
# channel serving as under `serve`: the first turns and the scale benchmarks open it.
BIG_HOME_CONFIG = """\
providers:
  mock: {type: mock, script: ["ok"]}
agents:
  main: {model: mock/bench, mode: read-only}
  ops: {model: mock/bench, mode: read-only}
  research: {model: mock/bench, mode: read-only}
workers:
  turns: 16
http:
  listen: 127.0.0.1:0
  token_env: HABAKKUK_BENCH_TOKEN
"""


# The session search before issue 27: bm25() over the window (its statistics cover every
# match in the table), FTS5's snippet().
OLD_SESSIONS = (
    "WITH recent AS MATERIALIZED (SELECT message_fts.rowid AS id,"
    " bm25(message_fts) AS score FROM message_fts"
    " JOIN message_text t ON t.message_id = message_fts.rowid"
    " JOIN sessions s ON s.id = t.session_id WHERE message_fts MATCH ?"
    " ORDER BY message_fts.rowid DESC LIMIT ?),"
    " best AS MATERIALIZED (SELECT id, score FROM recent ORDER BY score LIMIT ?)"
    " SELECT t.session_id, s.agent, s.title, t.seq, t.role, m.created_at,"
    " snippet(message_fts, 0, '[', ']', '…', 12) AS snip"
    " FROM best JOIN message_fts ON message_fts.rowid = best.id"
    " JOIN message_text t ON t.message_id = best.id"
    " JOIN sessions s ON s.id = t.session_id JOIN messages m ON m.id = best.id"
    " WHERE message_fts MATCH ? ORDER BY best.score, best.id DESC"
)
