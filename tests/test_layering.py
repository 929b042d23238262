"""The layers stay apart: the engine never imports the UI or anything above it."""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_hold() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports, "import-linter is part of the test extra"
    result = subprocess.run([lint_imports], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_importing_the_engine_and_runtime_loads_no_textual() -> None:
    code = (
        "import sys, habakkuk.engine.agent.turn, habakkuk.runtime\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('textual', 'anthropic', 'openai', 'litellm')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


@functools.cache
def _graph(type_checking: bool) -> Any:
    import grimp

    # No cache: a cache left by an earlier build can miss an edit made since.
    return grimp.build_graph(
        "habakkuk", exclude_type_checking_imports=not type_checking, cache_dir=None
    )


def _cycles(
    package: str, *, type_checking: bool = False, siblings: bool = False
) -> list[list[str]]:
    """The import cycles among `package`'s modules (strongly connected groups of two or more).

    A name imported only for type checking makes no cycle at run time, so those imports
    count only with `type_checking`; `siblings` looks only at the package's own modules.
    """
    graph = _graph(type_checking)
    if siblings:
        modules = {m for m in graph.modules if m.rpartition(".")[0] == package}
    else:
        modules = {m for m in graph.modules if m == package or m.startswith(package + ".")}
    edges = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in edges[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(modules):
        if module not in index:
            visit(module)
    return found


def test_the_engine_the_protocols_and_the_entry_points_have_no_import_cycles() -> None:
    # config <-> presets and mcp manager <-> tools were cycles; app <-> cli <-> commands <->
    # screens and runtime <-> server were too (the layers contract now forbids those).
    for package in ("habakkuk.engine", "habakkuk.protocols"):
        assert _cycles(package) == [], package
    entry = [
        group
        for group in _cycles("habakkuk")
        if any(m.split(".")[1] in ("cli", "commands", "app", "runtime") for m in group)
    ]
    assert entry == []


def test_no_module_is_part_of_an_import_cycle_at_run_time() -> None:
    # server.app <-> its route modules (api, chat, health, ...) was one: the routes'
    # shared helpers and the `Served` Protocol moved down to server/served.py.
    assert _cycles("habakkuk") == []


def test_modules_of_one_package_do_not_import_each_other_even_for_type_checking() -> None:
    # channels.conversation <-> channels.gateway and screens.chat <-> screens.chat_conversation
    # were such cycles (through TYPE_CHECKING imports): a Protocol of what one uses of the
    # other (ConversationGateway, ChatView) now lives with the user.
    graph = _graph(True)
    packages = sorted({m.rpartition(".")[0] for m in graph.modules if "." in m})
    found = {
        package: groups
        for package in packages
        if (groups := _cycles(package, type_checking=True, siblings=True))
    }
    assert found == {}
