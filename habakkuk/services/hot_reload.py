"""Hot reload (spec 000 "Hot reload"): config.yaml and the agents' memory notes, followed
while `habakkuk serve` or the terminal app runs (a maintenance worker, services/maintenance).

- A memory note edited by hand is reindexed at once (not at the next search), so a search,
  the prompt's listing of a new session and the history all see it; the change is recorded
  in the history as a hand edit, as a search's sync would have.
- config.yaml is read again with the start-up's loader. Invalid: its one-line error (file
  and line) is logged and shown, the running config kept. Valid: `hooks:` is applied in
  place when it differs from the running hooks; every other section that differs from the
  file this process started on is logged once as needing a restart and listed in the
  overview (ControlRoom.config_state); a `ConfigReloaded` event tells the terminal app.

Why the inotify reader (knowledge/folder_watch.py) and not watchfiles: the kernel queues
the event the moment a file is closed or renamed, and `loop.add_reader` on the inotify
descriptor wakes this task then, with no thread and no debounce; watchfiles' `awatch`
runs a Rust thread per watcher and batches changes (50 ms steps, up to 1.6 s), and would
load its extension into every serving process for two small folders. Watching only
"settled" events (closed after writing, renamed in, created, deleted) means neither a
half-written file nor each commit to the databases beside config.yaml wakes it. Where
inotify is missing (not Linux, or the user's watch limit is reached) the loop polls every
POLL_SECONDS, as the spec says: config.yaml's stat is compared (a change no event names
is read once it has held still from one poll to the next), and an unwatched notes folder
is rescanned (the index compares each file's mtime and size with its row).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import TYPE_CHECKING, Protocol

from habakkuk.engine.config import Config, load_config
from habakkuk.engine.config_diff import IN_PLACE, changed_sections
from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.events import ConfigReloaded, EventBus
from habakkuk.engine.home import Home
from habakkuk.engine.hooks import Hooks
from habakkuk.engine.overview import ConfigState
from habakkuk.engine.timeouts import wait_within
from habakkuk.knowledge.folder_watch import SETTLED, FolderWatch

if TYPE_CHECKING:
    from habakkuk.knowledge.service import Memory
    from habakkuk.services.overview import ControlRoom

log = logging.getLogger(__name__)

POLL_SECONDS = 3.0  # the spec's "polls $HABAKKUK_HOME every 3 seconds"
CONFIG_FILE = "config.yaml"

# What identifies one version of a file: inode (an editor's rename), size, mtime, ctime.
Signature = tuple[int, int, int, int] | None


def signature(path: os.PathLike[str]) -> Signature:
    """The file's (inode, size, mtime, ctime), None when it cannot be stat-ed."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def one_line(text: str) -> str:
    """`text` with its whitespace runs (newlines too) as single spaces."""
    return " ".join(text.split())


class ReloadHost(Protocol):
    """What the hot reload needs of the runtime that starts it."""

    home: Home
    hooks: Hooks
    memory: Memory
    bus: EventBus
    control: ControlRoom

    @property
    def config(self) -> Config: ...


class HotReload:
    """Follows config.yaml and each configured agent's notes folder until cancelled."""

    def __init__(self, host: ReloadHost, *, poll: float = POLL_SECONDS):
        """Start following config.yaml now (synchronously, so that an edit made once the
        workers have started is never taken for the file this process runs on)."""
        self._host = host
        self._poll = poll
        self._wake = asyncio.Event()
        # Watched before the file is read: an edit from here on wakes the loop.
        self._config_watch = FolderWatch(host.home.root, SETTLED)
        self._config_seen: Signature = signature(host.home.config_path)
        self._config_moving: Signature = None  # changed with no event, awaiting the next poll
        self._baseline = self._file_config(host)
        self._notes: dict[str, FolderWatch] = {}
        self._readers: dict[FolderWatch, int] = {}  # watch -> the descriptor add_reader'd
        # Each section logged as needing a restart, with the value it was logged for: a
        # second edit of it is logged again, the same file read again is not.
        self._logged: dict[str, object] = {}
        self.state = ConfigState()

    @staticmethod
    def _file_config(host: ReloadHost) -> Config:
        """config.yaml as it is now: what "changed" is measured from. Not the running
        config itself, which the process may have amended (`serve --agents` sets
        serve.agents): that is no edit of the file. A file that cannot be read now (none:
        a runtime given its config; broken since the start) falls back on the running
        config, and its error is reported at its next change."""
        try:
            return load_config(host.home)
        except HabakkukError:
            return host.config

    async def run(self) -> None:
        """Watch, and act on each change, until cancelled (`close` then stops watching)."""
        host = self._host
        self._listen(self._config_watch)
        # The notes folders exist once each agent's memory is open (open_ahead).
        await host.memory.opened_ahead()
        for agent in list(host.config.agents):
            watch = FolderWatch(host.home.agent_dir(agent) / "memory", SETTLED)
            self._notes[agent] = watch
            self._listen(watch)
            # Edits made before the watch began (while Habakkuk was stopped, say) are
            # indexed now rather than at the first search.
            await self._reindex(agent)
        while True:
            with contextlib.suppress(TimeoutError):
                await wait_within(self._wake.wait(), self._poll)
            self._wake.clear()
            try:
                await self.check()
            except Exception:  # a bug here must not end the following of the home
                log.exception("hot reload: the check of %s failed", host.home.root)

    def close(self) -> None:
        """Stop watching (idempotent): called when the task ends, even one cancelled
        before it ran, whose body (and so its `finally`) never started."""
        loop = asyncio.get_running_loop()
        for watch in self._watches():
            fd = self._readers.pop(watch, -1)
            if fd >= 0:
                loop.remove_reader(fd)
            watch.close()

    def _watches(self) -> list[FolderWatch]:
        return [self._config_watch, *self._notes.values()]

    def _listen(self, watch: FolderWatch) -> None:
        """Wake the loop once `watch` has events. Registered afresh after each drain: a
        watch that lost events opens a new descriptor, maybe under the old number."""
        loop = asyncio.get_running_loop()
        old = self._readers.pop(watch, -1)
        if old >= 0:
            loop.remove_reader(old)
        fd = watch.fileno()
        if fd >= 0:
            loop.add_reader(fd, self._readable, watch)
            self._readers[watch] = fd

    def _readable(self, watch: FolderWatch) -> None:
        # One wake per drain: level-triggered, the reader would fire on every pass of the
        # loop until check() reads the events (a busy loop during a long reindex).
        fd = self._readers.pop(watch, -1)
        if fd >= 0:
            asyncio.get_running_loop().remove_reader(fd)
        self._wake.set()

    async def check(self) -> None:
        """Act on what changed since the last check: config.yaml, then the notes."""
        host = self._host
        names = self._config_watch.changed()
        self._listen(self._config_watch)
        seen = await asyncio.to_thread(signature, host.home.config_path)
        if names is not None and CONFIG_FILE in names:
            # Closed after writing or renamed in: whole.
            self._config_seen, self._config_moving = seen, None
            await self.reload_config()
        elif seen != self._config_seen:
            # A change no event names: a write still under way (the watch skips each
            # write() call), a symbolic link's new target, a platform without inotify.
            # Read once it has held still from one poll to the next, not half-written.
            if seen == self._config_moving:
                self._config_seen, self._config_moving = seen, None
                await self.reload_config()
            else:
                self._config_moving = seen
        for agent, watch in list(self._notes.items()):
            names = watch.changed()
            self._listen(watch)
            if names is None:
                if not watch.active and not await asyncio.to_thread(watch.folder.is_dir):
                    continue  # no notes folder (its memory failed to open): nothing to index
            elif not any(n.endswith(".md") and not n.startswith(".") for n in names):
                continue  # a write's temporary file, or nothing
            await self._reindex(agent)

    async def _reindex(self, agent: str) -> None:
        try:
            stats = await self._host.memory.catch_up(agent)
        except Exception as exc:  # a broken memory.db must not end the watching of the rest
            log.warning("memory of %s: cannot index the edited notes: %s", agent, exc)
            return
        if stats.updated or stats.removed:
            log.info(
                "memory of %s: indexed %d note(s) edited and %d removed by hand",
                agent,
                stats.updated,
                stats.removed,
            )

    async def reload_config(self) -> None:
        """Read config.yaml again and apply, record or report what changed."""
        host = self._host
        try:
            loaded = await asyncio.to_thread(load_config, host.home)
        except HabakkukError as exc:
            self._report_invalid(one_line(str(exc)))
            return
        running = host.config
        applied: list[str] = []
        if loaded.hooks != running.hooks:
            # Runs in flight finish with the hooks they started with; the next event
            # matches the new list.
            host.hooks.replace(loaded.hooks)
            running.hooks = loaded.hooks
            applied.append("hooks")
            log.info("%s: hooks: applied (%d hook(s))", loaded.path, len(loaded.hooks))
        if loaded.budget != running.budget:  # the spending limits: read at every model call
            running.budget = loaded.budget
            applied.append("budget")
        changed = changed_sections(self._baseline, loaded)
        restart = [section for section in changed if section not in IN_PLACE]
        for section in restart:
            value = getattr(loaded, section)
            if section not in self._logged or self._logged[section] != value:
                log.warning("%s: %s: changed; restart Habakkuk to apply it", loaded.path, section)
                self._logged[section] = value
        for section in set(self._logged) - set(restart):
            del self._logged[section]  # back as it runs: a later edit is logged again
        if self.state.invalid:
            log.info("%s: valid again", loaded.path)
        self._publish(applied, ConfigState(tuple(restart), ""))

    def _report_invalid(self, problem: str) -> None:
        if problem == self.state.invalid:
            return  # said once; the file is still as broken
        log.warning("%s (ignored: the running config is kept)", problem)
        self._publish([], ConfigState(self.state.restart, problem))

    def _publish(self, applied: list[str], state: ConfigState) -> None:
        """Show `state` in the overview; tell the app when anything changed."""
        before, self.state = self.state, state
        self._host.control.config_state = state
        if applied or state != before:
            self._host.bus.publish(
                ConfigReloaded(applied=applied, restart=list(state.restart), invalid=state.invalid)
            )


def start_hot_reload(host: ReloadHost, *, poll: float = POLL_SECONDS) -> asyncio.Task[None]:
    """The maintenance task: a HotReload on `host`, following config.yaml from now on,
    run until cancelled."""
    reload = HotReload(host, poll=poll)
    task = asyncio.create_task(reload.run(), name="hot-reload")
    task.add_done_callback(lambda _: reload.close())
    return task
