"""Import the openai SDK's type packages (and httpcore2) only as far as a call uses them.

`import openai` runs `openai/types/__init__.py`, which imports every model and
parameter type of every endpoint (hundreds of modules, hundreds of pydantic
classes): 0.6 s of a one-shot `habakkuk run`, of which a Chat Completions call
uses almost nothing. `defer_type_packages` installs an import finder that loads
each package under `openai.types` without running its `__init__`: its submodules
import as usual (`openai.types.chat.chat_completion` loads that one module), and
the first read of a name the package itself defines (`openai.types.chat.Foo`,
`from openai.types import Batch`) runs the real `__init__` then, in place, so
every name is there as before. Where the package's `__init__` only re-exports names
from its submodules (`from .chat_completion import ChatCompletion as ChatCompletion`, as
every one of the SDK's type packages does), a name is read from the one submodule that
defines it, and the `__init__` runs only for a name it does not re-export that way
(`__all__`, `dir()`, a star import): `from openai.types.chat import X`, which the SDK's
own `openai.lib` does as it loads, then costs one module, not the hundred the package
lists.

httpcore2 (httpx2's HTTP/1.1 and HTTP/2 engine: h11, h2, its pools) is deferred the same
way: the SDK's aiohttp client never sends through it, and once handed a certificate
context (tls_context.py) never reads a name of it either.

Only the time of an import moves; what any import returns is unchanged. It uses
no private name of the SDK, only its public package layout; tests/llm checks both
that a chat call leaves the big modules unloaded and that names still resolve.

Not for anthropic (2.17): its own modules import names from its type packages as
they load (`from ..types import X`), and it imports every resource eagerly, so
deferring the packages' `__init__` would save nothing there.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

# The packages whose `__init__` waits for its first use: the SDK's types, and httpcore2,
# httpx2's HTTP engine, which a client sending through aiohttp never runs (httpx2 imports
# it to make a certificate context, which new_client hands the SDK: tls_context.py). And
# the SDK's vendored aiohttp transport, whose `__init__` imports aiohttp for its transport
# module, while the SDK reads only its client class (which imports the transport when a
# client is made): a process whose clients send through httpx2 (transport.py) never
# loads aiohttp. Should the SDK move the package, nothing breaks: the time comes back,
# and tests/cli/test_run_start.py, which lists aiohttp as unloaded, fails.
DEFERRED = ("openai.types", "httpcore2", "openai._vendor.httpx_aiohttp")


def _reexports(loader: importlib.abc.Loader, name: str) -> dict[str, tuple[str, str]]:
    """{name: (module, attribute)} of a package `__init__` made only of relative
    re-exports (a docstring, `__all__` and `from __future__` aside); {} for any other
    (its names come from running it)."""
    get_source = getattr(loader, "get_source", None)
    source = get_source(name) if get_source is not None else None
    if source is None:
        return {}
    names: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), name)
            for alias in node.names:
                if alias.name == "*":
                    return {}
                if node.module is None:  # `from . import sub`: the submodule itself
                    names[alias.asname or alias.name] = (f"{base}.{alias.name}", "")
                else:
                    names[alias.asname or alias.name] = (base, alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        elif isinstance(node, ast.Assign) and [
            getattr(target, "id", None) for target in node.targets
        ] == ["__all__"]:
            continue  # read through the real `__init__` (a name not listed here)
        else:
            return {}
    return names


class _DeferredInit(importlib.abc.Loader):
    """A package loader that creates the package and runs its `__init__` on first use."""

    def __init__(self, loader: importlib.abc.Loader):
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        loader = self._loader
        lock = threading.RLock()  # a submodule's import may read a name of the package
        reexports: list[dict[str, tuple[str, str]]] = []  # parsed on the first read

        def run_init() -> None:
            with lock:
                if module.__dict__.get("__getattr__") is __getattr__:
                    # From here on the package is an ordinary one, its own __init__ run.
                    del module.__dict__["__getattr__"]
                    del module.__dict__["__dir__"]
                    loader.exec_module(module)

        def __getattr__(name: str) -> Any:
            with lock:
                if not reexports:
                    reexports.append(_reexports(loader, module.__name__))
                where = reexports[0].get(name)
            if where is None and not name.startswith("__") and reexports[0]:
                # `from package import submodule` asks the package first: the submodule.
                sub = f"{module.__name__}.{name}"
                if importlib.util.find_spec(sub) is not None:
                    where = (sub, "")
            if where is None or module.__dict__.get("__getattr__") is not __getattr__:
                run_init()
                return object.__getattribute__(module, name)
            source, attribute = where
            found = importlib.import_module(source)
            value = getattr(found, attribute) if attribute else found
            setattr(module, name, value)  # what the `__init__` line would have bound
            return value

        def __dir__() -> list[str]:
            run_init()
            return sorted(module.__dict__)

        module.__dict__["__getattr__"] = __getattr__
        module.__dict__["__dir__"] = __dir__


class _DeferringFinder(importlib.abc.MetaPathFinder):
    """Finds the deferred packages as the path finder does, with a deferring loader."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if not any(fullname == p or fullname.startswith(p + ".") for p in DEFERRED):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.submodule_search_locations is None or spec.loader is None:
            return spec  # a plain module (or nothing): imported as usual
        spec.loader = _DeferredInit(spec.loader)
        return spec


_FINDER = _DeferringFinder()


def defer_type_packages() -> None:
    """Install the finder (once); type packages imported after this wait for their use."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
