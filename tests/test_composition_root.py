"""The composition root stays a composition root: services are its attributes, not its methods."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

from tests.conftest import mock_config

PACKAGE = Path(__file__).resolve().parents[1] / "habakkuk"


async def test_the_runtime_re_binds_no_service_method_onto_itself(runtime_factory: Any) -> None:
    # Surfaces call runtime.turns.submit, runtime.sessions.session, ...: one path per call.
    runtime = await runtime_factory(mock_config())
    borrowed = sorted(
        name
        for name, value in vars(runtime).items()
        if inspect.ismethod(value) and value.__self__ is not runtime
    )
    assert borrowed == []


def class_lines(node: ast.ClassDef) -> int:
    return (node.end_lineno or 0) - node.lineno + 1


def test_runtime_py_stays_under_400_lines_and_no_class_over_600() -> None:
    assert len((PACKAGE / "runtime.py").read_text(encoding="utf-8").splitlines()) < 400
    long = [
        f"{path.relative_to(PACKAGE)}:{node.name} ({class_lines(node)} lines)"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and class_lines(node) > 600
    ]
    assert long == []
