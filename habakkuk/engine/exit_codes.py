"""Process exit codes, shared by the CLI, its commands and the setup wizard.

The one rule every command group follows (the README says it once, under "From the
shell"):

- EXIT_OK (0): done.
- EXIT_FAILED (1): the command ran and what it did failed: a turn or a check failed,
  a search found nothing, a write was refused for what it held (a secret, a dangerous
  skill).
- EXIT_USAGE (2): the command cannot run as given: bad usage or input, a bad config,
  or a name that matches nothing (an agent, session, note, change, card, schedule,
  skill, plugin or checkpoint: EXIT_NOT_FOUND).

Standard library only (and engine/errors.py, which is too): `habakkuk --help` imports it.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
# Naming something that does not exist is a mistake in what was asked, as bad input is.
EXIT_NOT_FOUND = EXIT_USAGE
# `habakkuk serve` stopped itself past limits.max_rss_mb (services/memory_guard.py): its
# jobs finished or were handed back; a supervisor restarts it. 75 is sysexits' EX_TEMPFAIL
# ("try again later"), which systemd's RestartForceExitStatus= or a shell loop can match.
EXIT_MEMORY = 75
# The reader of standard output went away (`habakkuk sessions | head`): what a program
# killed by SIGPIPE reports in a shell (128 + 13), as git and coreutils do; said nowhere,
# since the reader is gone and the user asked for no more.
EXIT_PIPE = 141


def exit_code(error: BaseException) -> int:
    """The exit code of a user-facing error: EXIT_USAGE for a bad config, bad input or a
    name that matches nothing (ConfigError, BadInput, NotFound), EXIT_FAILED for any
    other."""
    from habakkuk.engine.errors import BadInput, ConfigError, NotFound

    if isinstance(error, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(error, ConfigError | BadInput):
        return EXIT_USAGE
    return EXIT_FAILED


def error_line(where: str, error: BaseException | str) -> str:
    """The one stderr line of a failed command: `habakkuk: WHERE: MESSAGE`.

    Each place says where once: the services' messages often begin with their own
    subject ("memory: no note 'x'", "board: no card 'x'"), which under `memory show` or
    `board show` would say it twice, so that leading `SUBJECT: ` (the command's word,
    or its singular) is dropped. `where` "" prints the message after `habakkuk: ` only.
    """
    message = str(error)
    if not where:
        return f"habakkuk: {message}"
    command = where.split()[0]
    for subject in dict.fromkeys((command, command.removesuffix("s"))):
        if message.startswith(f"{subject}: "):
            message = message[len(subject) + 2 :]
            break
    return f"habakkuk: {where}: {message}"
