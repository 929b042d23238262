"""The files a plugin runs as programs, and their executable bit.

An install writes every file 0600 (knowledge/hub/unpack.py), so nothing a download brings
can run before the user has seen it. A plugin's manifest names the files it runs: an MCP
server's `command` (`./bin/status-server`), and the program of each simple command of a
hook's `command` or a script command's `script` (`./deploy.sh --fast`, `./log.sh`), read
with the shell parser the blocklist uses. `habakkuk plugins enable`, after showing them,
sets the owner's executable bit on exactly those files; `disable` takes it away again, so
a disabled plugin's programs cannot be started by accident either.

Only a relative path with a slash names a plugin file (`deploy.sh` alone is looked up on
PATH, an absolute path is somebody else's file); a path with `..` is never touched; and a
file is changed only when every folder on its way is a real folder of the plugin and the
file itself a regular file, opened without following links, so a link placed in the
plugin folder after the install cannot point the chmod elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.plugin_config import PluginManifest


def named_programs(manifest: PluginManifest) -> list[str]:
    """The plugin-relative paths of the files `manifest` runs as programs, sorted."""
    found: set[str] = set()
    for server in manifest.mcp_servers.values():
        if server.command is None:
            continue
        # load_manifest made a relative command absolute in the plugin folder.
        command = Path(server.command)
        if command.is_absolute() and command.is_relative_to(manifest.folder):
            _add(found, command.relative_to(manifest.folder).as_posix())
        else:
            _add(found, server.command)
    for hook in manifest.hooks:
        for program in shell_programs(hook.command):
            _add(found, program)
    for spec in manifest.commands.values():
        if spec.script is not None:
            for program in shell_programs(spec.script):
                _add(found, program)
    return sorted(found)


def _add(found: set[str], word: str) -> None:
    """Keep `word` when it names a file inside the plugin folder (see the module docstring)."""
    if "/" not in word or word.startswith("/") or "\0" in word:
        return
    parts = [p for p in PurePosixPath(word).parts if p != "."]
    if not parts or ".." in parts:
        return
    found.add("/".join(parts))


def shell_programs(text: str) -> list[str]:
    """The program word of each simple command of shell `text` (wrappers such as `env`
    and `timeout` peeled off; a word holding a substitution is not a known program)."""
    from habakkuk.tools.shell_syntax import expand_words, parse, resolve, walk_simple_commands

    programs = []
    for simple in walk_simple_commands(parse(text)):
        resolved = resolve(expand_words(simple.words))
        if resolved is None or not resolved.argv:
            continue
        word = resolved.argv[0]
        if not word.subs and not word.procs:
            programs.append(word.value)
    return programs


def set_executable(folder: Path, programs: Iterable[str], executable: bool) -> list[str]:
    """Set (or clear) the owner's executable bit of each of `programs` in `folder`; the
    ones changed or already so. A missing file is skipped (the program fails with its own
    error when run); a link or a non-regular file on the way is a HabakkukError naming it,
    and the files already changed are put back, so the plugin's modes are all or nothing."""
    done: list[str] = []
    changed: list[str] = []
    try:
        for program in programs:
            result = _chmod(folder, program, executable)
            if result is not None:
                done.append(program)
            if result:
                changed.append(program)
    except HabakkukError:
        for program in changed:
            with contextlib.suppress(HabakkukError, OSError):
                _chmod(folder, program, not executable)
        raise
    return done


def not_executable(folder: Path, programs: Iterable[str]) -> list[str]:
    """The programs that are plain files of `folder` without the owner's executable bit
    (a plugin enabled before enabling set it: enabling it again does)."""
    missing = []
    for program in programs:
        path = folder / program
        try:
            mode = path.lstat().st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode) and not mode & stat.S_IXUSR:
            missing.append(program)
    return missing


def _chmod(folder: Path, program: str, executable: bool) -> bool | None:
    """Set or clear the bit of one file: True when its mode changed, False when it was
    already so, None when it is missing."""
    parts = program.split("/")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    opened: list[int] = []
    try:
        try:
            fd = os.open(folder, flags | os.O_DIRECTORY)
            opened.append(fd)
            for part in parts[:-1]:
                fd = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
                opened.append(fd)
            # O_NONBLOCK: a FIFO put in its place must not hang the open.
            fd = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=fd)
            opened.append(fd)
        except FileNotFoundError:
            return None
        except OSError as exc:  # ELOOP, ENOTDIR: a link or a file where a folder should be
            raise HabakkukError(
                f"{folder / program}: not a plain file of the plugin ({exc.strerror}); "
                "its mode was not changed"
            ) from None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise HabakkukError(f"{folder / program}: not a regular file; its mode was not changed")
        wanted = mode | stat.S_IXUSR if executable else mode & ~stat.S_IXUSR
        if stat.S_IMODE(wanted) == stat.S_IMODE(mode):
            return False
        os.fchmod(fd, stat.S_IMODE(wanted))
        return True
    finally:
        for fd in reversed(opened):
            with contextlib.suppress(OSError):
                os.close(fd)
