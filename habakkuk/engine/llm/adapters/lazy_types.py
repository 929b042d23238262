"""Import the openai SDK's type packages (and httpcore2) only as far as a call uses them.

`import openai` runs `openai/types/__init__.py`, which imports every model and
parameter type of every endpoint (hundreds of modules, hundreds of pydantic
classes): 0.6 s of a one-shot `habakkuk run`, of which a Chat Completions call
uses almost nothing. `defer_type_packages` installs an import finder that loads
each package under `openai.types` without running its `__init__`: its submodules
import as usual (`openai.types.chat.chat_completion` loads that one module), and
the first read of a name the package itself defines (`openai.types.chat.Foo`,
`from openai.types import Batch`) runs the real `__init__` then, in place, so
every name is there as before.

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

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

# The packages whose `__init__` waits for its first use: the SDK's types, and httpcore2,
# httpx2's HTTP engine, which a client sending through aiohttp never runs (httpx2 imports
# it to make a certificate context, which new_client hands the SDK: tls_context.py).
DEFERRED = ("openai.types", "httpcore2")


class _DeferredInit(importlib.abc.Loader):
    """A package loader that creates the package and runs its `__init__` on first use."""

    def __init__(self, loader: importlib.abc.Loader):
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        loader = self._loader
        lock = threading.Lock()

        def __getattr__(name: str) -> Any:
            with lock:
                if module.__dict__.get("__getattr__") is __getattr__:
                    # From here on the package is an ordinary one, its own __init__ run.
                    del module.__dict__["__getattr__"]
                    loader.exec_module(module)
            return object.__getattribute__(module, name)

        module.__dict__["__getattr__"] = __getattr__


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
