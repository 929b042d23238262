"""The terminal app: a Textual App that runs the runtime in-process.

Sections are Textual MODES (chat, sessions, approvals, overview, memory, skills,
schedules, board), one key each,
shown in the footer and the command palette. The runtime is opened in a worker
after the first frame has painted, so this module imports nothing heavy: the
engine, the screens and their widgets load lazily.

The UI is a client of the runtime: it opens `habakkuk.runtime.Runtime`, hands it to the
screens as a `TerminalBackend` (habakkuk/screens/backend.py) whose services they call,
and follows `runtime.bus`; each event is forwarded to the screens as the Textual
message paired with its class (habakkuk/screens/bus_messages.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker

from habakkuk.engine.i18n import set_language, t
from habakkuk.engine.timeouts import wait_within
from habakkuk.screens.messages import RuntimeReady
from habakkuk.screens.sections import SECTIONS
from habakkuk.widgets.words import said

if TYPE_CHECKING:
    from habakkuk.engine.config import Config
    from habakkuk.engine.events import Subscription
    from habakkuk.engine.home import Home
    from habakkuk.runtime import Runtime
    from habakkuk.screens.backend import TerminalBackend
    from habakkuk.screens.chat import ChatScreen
    from habakkuk.services.approvals import Attendance

    # The screens type the runtime as a TerminalBackend: mypy checks here (never run)
    # that the Runtime this app hands them still is one.
    _runtime_serves_the_screens: TerminalBackend = cast("Runtime", None)

# Two Ctrl+C presses this close together quit the app.
DOUBLE_PRESS_SECONDS = 2.0
CLOSE_TIMEOUT_SECONDS = 10.0


class StartScreen(Screen[None]):
    """What the first frame shows while the chat screen and the runtime load."""

    def compose(self) -> ComposeResult:
        from textual.widgets import Static

        yield Static(t("tui.app.starting"), id="starting")


def _lazy(module: str, name: str) -> Callable[[], Screen[Any]]:
    """A MODES entry that imports its screen module only when first shown."""

    def build() -> Screen[Any]:
        import importlib

        screen_class = getattr(importlib.import_module(module), name)
        screen: Screen[Any] = screen_class()
        return screen

    return build


class HabakkukApp(App[None]):
    """Chat, sessions, approvals, the overview and memory over one in-process runtime."""

    TITLE = "Habakkuk"
    CSS_PATH = str(Path(__file__).with_name("app.tcss"))
    MODES = {
        "start": lambda: StartScreen(),
        "chat": _lazy("habakkuk.screens.chat", "ChatScreen"),
        "sessions": _lazy("habakkuk.screens.sessions", "SessionsScreen"),
        "approvals": _lazy("habakkuk.screens.approvals", "ApprovalsScreen"),
        "overview": _lazy("habakkuk.screens.overview", "OverviewScreen"),
        "memory": _lazy("habakkuk.screens.memory", "MemoryScreen"),
        "skills": _lazy("habakkuk.screens.skills", "SkillsScreen"),
        "schedules": _lazy("habakkuk.screens.schedules", "SchedulesScreen"),
        "board": _lazy("habakkuk.screens.board", "BoardScreen"),
        # No key of its own: the palette's "Logs: show" opens it.
        "logs": _lazy("habakkuk.screens.logs", "LogsScreen"),
    }
    # A one-line screen paints first; the chat and the runtime load after it.
    DEFAULT_MODE = "start"
    BINDINGS = [
        # Every section's key, in the footer while there is room for it (KeyFooter leaves
        # out whole keys, the least needed last); the palette and /help list them all.
        *(
            Binding(s.key, f"go('{s.mode}')", s.label, id=f"go.{s.mode}", priority=True)
            for s in SECTIONS
        ),
        Binding("ctrl+c", "interrupt", "Stop", id="app.interrupt", priority=True, show=False),
        # Textual's usual quit key; listed in the palette and /help, kept off the footer.
        Binding("ctrl+q", "quit", "Quit", id="app.quit", priority=True, show=False),
    ]

    def __init__(
        self,
        home: Home | None = None,
        *,
        runtime: Runtime | None = None,
        config: Config | None = None,
        resume: bool = False,
        animate: bool = True,
    ) -> None:
        """`runtime` lets a test hand in an opened runtime (the app then does not close it);
        `config` is the home's config when the caller already loaded and checked it.

        `animate=False` turns off cursor blink and similar motion, for snapshots.
        """
        super().__init__()
        self._home = home
        self._given_runtime = runtime
        self._config = config
        self.runtime: Runtime | None = None
        self.resume = resume
        self.motion = animate
        self.startup_error: str | None = None
        self._subscription: Subscription | None = None
        self._pump: Worker[None] | None = None
        self._listeners: list[Screen[Any]] = []
        self._last_interrupt = -DOUBLE_PRESS_SECONDS
        self._runtime_closing = False
        self._attendance: Attendance | None = None
        if not animate:
            self.animation_level = "none"

    # -- startup -------------------------------------------------------------------------

    @property
    def home(self) -> Home:
        """The home this app works on ($HABAKKUK_HOME unless given)."""
        if self._home is None:
            if self._given_runtime is not None:
                self._home = self._given_runtime.home
            else:
                from habakkuk.engine.home import Home, default_home

                self._home = Home(default_home())
        return self._home

    def on_load(self) -> None:
        """Speak config.yaml's `language:` (when set) before any screen is made: the app's
        task sets it, and every widget's task, started from it, inherits it. Without one,
        the language is the caller's (`habakkuk` chose it from the locale)."""
        config = self._config
        if config is None and self._given_runtime is not None:
            config = self._given_runtime.config
        if config is not None:
            language = config.language
        else:
            # Not parsed yet (the runtime parses it after the first frame): its one line.
            from habakkuk.engine.errors import HabakkukError
            from habakkuk.engine.i18n.locale import config_language

            try:
                language = config_language(self.home.config_path)
            except HabakkukError:
                language = ""  # a bad $HABAKKUK_HOME: the runtime's start reports it
        if language:
            set_language(language)

    def on_mount(self) -> None:
        """First frame first: the chat, the setup screen and the runtime come after it."""
        self.call_after_refresh(self._after_first_frame)

    def _after_first_frame(self) -> None:
        self.switch_mode("chat")
        if self._given_runtime is None and not self.home.config_path.exists():
            from habakkuk.screens.setup import SetupScreen

            self.push_screen(SetupScreen(self.home), callback=self._after_setup)
            return
        self._start_runtime()

    def _after_setup(self, written: Path | None) -> None:
        self._start_runtime()

    def open_setup(self) -> None:
        """The palette's "Setup: providers": the setup screen over the running app."""
        from habakkuk.screens.setup import SetupScreen

        if self.runtime is None or self.screen.id == "setup":  # first run, or open already
            return

        def saved(written: Path | None) -> None:
            if written is not None:
                # The open runtime keeps the config it read; the next start reads this one.
                self.notify(t("tui.notice.saved_config", path=written), markup=False)

        self.push_screen(SetupScreen(self.home), callback=saved)

    def open_channel_setup(self) -> None:
        """The palette's "Setup: chat channel": the channel form over the running app."""
        from habakkuk.screens.channel_setup import ChannelSetupScreen

        if self.screen.id == "channel-setup":
            return

        def saved(name: str | None) -> None:
            if name is not None:
                self.notify(t("tui.notice.saved_channel", name=name), markup=False)

        self.push_screen(ChannelSetupScreen(self.home), callback=saved)

    @work(exclusive=True, group="runtime")
    async def _start_runtime(self) -> None:
        from habakkuk.engine.errors import HabakkukError
        from habakkuk.runtime import Runtime

        runtime = self._given_runtime
        if runtime is None:
            try:
                runtime = await Runtime.open(self.home, self._config)
            except HabakkukError as exc:
                self.startup_error = f"habakkuk: {exc}"
                self.exit(return_code=2)
                return
        # This terminal attends: it answers approvals and the agent's clarify questions.
        self._attendance = runtime.approvals.attach(questions=True)
        runtime.start_workers(maintenance=True)
        self.runtime = runtime
        if self._given_runtime is None and runtime.config.http is not None:
            self._start_http(runtime)
        # Big enough that a long streamed reply is never thinned out for the UI.
        self._subscription = runtime.bus.subscribe(maxsize=100_000)
        self._pump = self._pump_events(self._subscription)
        self.refresh_bindings()
        for screen in list(self._listeners):
            screen.post_message(RuntimeReady())
        if self.resume:
            self.switch_mode("sessions")

    @work(group="http")
    async def _start_http(self, runtime: Runtime) -> None:
        """The config's HTTP surface runs on the app's loop too (a failure is one notice)."""
        from habakkuk.engine.errors import HabakkukError

        try:
            await runtime.http.serve(lambda line: self.notify(line, markup=False))
        except (HabakkukError, OSError) as exc:
            self.notify(f"HTTP server not started: {exc}", severity="error", markup=False)

    @work(group="events")
    async def _pump_events(self, subscription: Subscription) -> None:
        from habakkuk.engine.events import ConfigReloaded
        from habakkuk.screens.bus_messages import message_for
        from habakkuk.screens.reload_notice import ReloadNotices

        reloads = ReloadNotices()
        async for event in subscription:
            if isinstance(event, ConfigReloaded):  # config.yaml changed on disk
                for text, severity in reloads.notices(event):
                    self.notify(text, severity=severity, timeout=10, markup=False)
            for screen in list(self._listeners):
                screen.post_message(message_for(event))

    def listen(self, screen: Screen[Any]) -> None:
        """Deliver bus events (and RuntimeReady) to `screen` from now on."""
        if screen not in self._listeners:
            self._listeners.append(screen)

    def unlisten(self, screen: Screen[Any]) -> None:
        if screen in self._listeners:
            self._listeners.remove(screen)

    # -- navigation ----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Sections need the runtime: their keys appear once it is open (and not over the
        setup screens, whose ctrl+s and ctrl+o are their own)."""
        over_setup = self.screen.id in ("setup", "channel-setup")
        return not (action == "go" and (self.runtime is None or over_setup))

    def action_go(self, mode: str) -> None:
        """Show one section."""
        if self.runtime is not None and self.current_mode != mode:
            self.switch_mode(mode)

    def open_session(self, session_id: str) -> None:
        """Show `session_id` in the chat (the sessions and approvals screens use this)."""
        self.switch_mode("chat")
        chat = self.get_chat()
        if chat is not None:
            chat.open_session(session_id)

    def get_chat(self) -> ChatScreen | None:
        """The chat screen once it exists."""
        from habakkuk.screens.chat import ChatScreen

        for screen in self._listeners:
            if isinstance(screen, ChatScreen):
                return screen
        return None

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette lists every section and action as `category: action`."""
        if self.runtime is not None:
            for section in SECTIONS:
                words = f"tui.palette.go.{section.mode}"
                yield SystemCommand(
                    f"{t('tui.palette.go')}: {said(words, section.mode)}",
                    f"{said(words + '.about', section.about)} ({section.key})",
                    lambda m=section.mode: self.action_go(m),
                )
            # A section's own actions (`Memory: forget note`, ...).
            yield from getattr(screen, "palette_commands", lambda: ())()
        if self.runtime is not None:
            yield SystemCommand(
                f"{t('logs.palette.category')}: {t('logs.palette.show')}",
                t("logs.palette.about"),
                lambda: self.action_go("logs"),
            )
        yield self._entry("turn", "stop", self.stop_turn)
        yield from self._chat_commands()
        yield self._entry("app", "quit", self.action_quit)
        yield self._entry("app", "theme", self.action_change_theme)
        yield self._entry("setup", "providers", self.open_setup)
        yield self._entry("setup", "channel", self.open_channel_setup)
        yield self._entry("app", "keys", self.action_show_help_panel)

    @staticmethod
    def _entry(category: str, action: str, run: Callable[[], Any]) -> SystemCommand:
        """One of the app's own palette entries, `App: quit`, in the language in use."""
        words = f"tui.palette.{category}.{action}"
        return SystemCommand(
            f"{t(f'tui.palette.{category}')}: {t(words)}", t(words + ".about"), run
        )

    def _chat_commands(self) -> Iterable[SystemCommand]:
        """Every chat command of the terminal (habakkuk.conversation), `Session: compact`."""
        from habakkuk.conversation.commands import commands_for

        if self.runtime is None:
            return
        for command in commands_for("terminal"):
            if command.name == "stop":
                continue  # "Turn: stop" above also stops a queued turn and says so
            about = command.summary[:1].upper() + command.summary[1:]
            if command.name == "new":
                about += " (ctrl+n)"
            yield SystemCommand(
                command.label,
                f"{about} — {command.usage()}",
                lambda c=command: self._run_chat_command(c.name, c.args),
            )

    def _run_chat_command(self, name: str, args: str) -> None:
        """Run /name in the chat; one that needs its arguments is put in the composer."""
        self.switch_mode("chat")
        chat = self.get_chat()
        if chat is not None:
            chat.run_command(f"/{name}", complete=bool(args) and not args.startswith("["))

    # -- stop and quit -------------------------------------------------------------------

    async def action_interrupt(self) -> None:
        """Ctrl+C: copy the selected text if any; else stop the running turn, and quit
        on a second press."""
        if self._copy_selection():
            return
        now = time.monotonic()
        if now - self._last_interrupt < DOUBLE_PRESS_SECONDS:
            await self.action_quit()
            return
        self._last_interrupt = now
        self.stop_turn(t("tui.notice.again_quits"), t("tui.notice.again_or_q_quits"))

    def stop_turn(self, stopping_hint: str = "", idle_hint: str = "") -> None:
        """Stop the chat's running turn, and say so."""
        chat = self.get_chat()
        if chat is not None and chat.stop_turn():
            self.notify(
                " ".join(filter(None, (t("tui.notice.stopping"), stopping_hint))), timeout=3
            )
        else:
            self.notify(" ".join(filter(None, (t("tui.notice.idle"), idle_hint))), timeout=3)

    def _copy_selection(self) -> bool:
        """Copy what is selected (text dragged over, or a selection in the focused text
        field) and collapse the selection, so the next Ctrl+C stops the turn again."""
        from textual.widgets import Input, TextArea

        focused = self.focused
        if isinstance(focused, TextArea) and focused.selected_text:
            text = focused.selected_text
            focused.move_cursor(focused.selection.end)
        elif isinstance(focused, Input) and focused.selected_text:
            text = focused.selected_text
            focused.cursor_position = focused.cursor_position  # the end of the selection
        else:
            text = self.screen.get_selected_text() or ""
            if not text:
                return False
            self.screen.clear_selection()
        self.copy_to_clipboard(text)
        self.notify(t("tui.notice.copied", count=len(text)), timeout=2)
        return True

    async def action_quit(self) -> None:
        """Close the runtime (leases released: a running turn resumes next start), then exit."""
        await self.close_runtime()
        self.exit()

    async def on_unmount(self) -> None:
        """However the app ends (quit, an error, a test), release the runtime's leases."""
        await self.close_runtime()

    async def close_runtime(self) -> None:
        """Stop following the bus and close the runtime this app opened."""
        if self._runtime_closing:
            return
        self._runtime_closing = True
        if self._subscription is not None:
            self._subscription.close()
        if self._pump is not None:
            # Blocked on the closed subscription's queue: it would never return by itself.
            self._pump.cancel()
        runtime, self.runtime = self.runtime, None
        if runtime is not None:
            if self._attendance is not None:
                self._attendance.release()
                self._attendance = None
            if self._given_runtime is None:
                await wait_within(runtime.close(), CLOSE_TIMEOUT_SECONDS)


def parse_background(answer: bytes) -> bool | None:
    """Whether an OSC 11 answer (`ESC ] 11 ; rgb:RRRR/GGGG/BBBB BEL`) names a light colour."""
    import re

    match = re.search(rb"rgba?:([0-9a-fA-F]+)/([0-9a-fA-F]+)/([0-9a-fA-F]+)", answer)
    if match is None:
        return None
    # Each channel is 1-4 hex digits, full scale 16**n - 1: a shift, as int ** int is Any.
    red, green, blue = (int(part, 16) / ((1 << 4 * len(part)) - 1) for part in match.groups())
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue > 0.5


def colorfgbg_is_light(value: str) -> bool | None:
    """Whether $COLORFGBG (`fg;bg`, set by some terminals) has a light background."""
    background = value.split(";")[-1].strip()
    if not background.isdigit():
        return None
    return int(background) in (7, 15)


def terminal_is_light(timeout: float = 0.1) -> bool | None:
    """Ask the terminal for its background colour (OSC 11, so it works over SSH).

    None when stdin/stdout are not a terminal or it does not answer in time;
    $COLORFGBG is the fallback.
    """
    import os
    import sys

    fallback = colorfgbg_is_light(os.environ.get("COLORFGBG", ""))
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return fallback
    import select
    import termios
    import tty

    fd = sys.stdin.fileno()
    try:
        saved = termios.tcgetattr(fd)
    except termios.error:
        return fallback
    answer = b""
    try:
        tty.setcbreak(fd)
        os.write(sys.stdout.fileno(), b"\x1b]11;?\x07")
        deadline = time.monotonic() + timeout
        while not (answer.endswith(b"\x07") or answer.endswith(b"\x1b\\")):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                break
            answer += os.read(fd, 256)
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)
    found = parse_background(answer)
    return fallback if found is None else found


def run_app(*, resume: bool = False, config: Config | None = None) -> int:
    """Run the terminal app on $HABAKKUK_HOME; returns the exit code."""
    app = HabakkukApp(resume=resume, config=config)
    if terminal_is_light():
        # Colours follow the terminal's background; NO_COLOR still drops them.
        app.theme = "textual-light"

    async def main() -> None:
        try:
            await app.run_async()
        finally:
            # The app may end without action_quit (an error): never leave leases behind.
            await app.close_runtime()

    import sys

    from habakkuk.widgets.bidi import terminal_reorders

    # The app draws right-to-left lines in visual order itself (widgets/bidi.py): a
    # terminal that also reorders (VTE, mlterm: BiDi's "implicit mode") is asked not to
    # while it runs, and given its default back after.
    terminal = sys.__stderr__
    with terminal_reorders(terminal, False):
        asyncio.run(main())
    if app.startup_error:
        print(app.startup_error, file=sys.stderr)
    return app.return_code or 0
