"""habakkuk/cli/ is one module per command group: each declares and runs its commands,
and none grows a function a reader cannot take in at once."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from habakkuk.cli.entry import APP, COMMANDS, SERVE, SMOKE, build_parser

CLI = Path(__file__).resolve().parents[2] / "habakkuk" / "cli"


def test_every_command_has_a_module_that_declares_and_runs_it() -> None:
    for name, (module, about, _description) in COMMANDS.items():
        group = importlib.import_module(module)
        assert callable(group.add_arguments) and callable(group.main), name
        assert about, name
    for module in (SMOKE, SERVE, APP):
        assert callable(importlib.import_module(module).main), module
    # Every command's arguments declare without a clash (argparse refuses one), all at once.
    listed = build_parser().format_help()
    assert set(COMMANDS) <= set(listed.split())


def test_no_function_of_the_cli_is_over_80_lines() -> None:
    long = [
        f"{path.name}:{node.name} ({(node.end_lineno or node.lineno) - node.lineno + 1} lines)"
        for path in sorted(CLI.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (node.end_lineno or node.lineno) - node.lineno + 1 > 80
    ]
    assert long == []
