"""The `habakkuk` command: the terminal app by default, `--serve`, and the subcommands.

One module per command group (`run`, `sessions`, `board`, `memory`, `doctor`, `setup`,
...; habakkuk/cli/entry.py lists them). `main` and `build_parser` live in `entry` and
load on first use, so importing one command's module does not load the entry point.
`python -m habakkuk.cli` runs `main` (habakkuk/cli/__main__.py), as the installed
`habakkuk` script does (pyproject.toml: `habakkuk = "habakkuk.cli:main"`).
"""

from __future__ import annotations

# typing.TYPE_CHECKING without importing typing, which `habakkuk --help` does not need
# (mypy reads the name the same way).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from habakkuk.cli.entry import build_parser, main

__all__ = ["build_parser", "main"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from habakkuk.cli import entry

        return getattr(entry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
