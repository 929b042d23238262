"""A one-shot `habakkuk run` loads only what its turn uses, and still knows every job kind.

The queue's kind registry is filled as modules declaring kinds are imported; the kinds
of handlers a one-shot run never starts (the memory review, the deliveries) are declared
in light modules beside their payloads, so a run that leaves the handlers unloaded
still takes back an interrupted job of any kind as a serving process would.
"""

from __future__ import annotations

from pathlib import Path

from tests.fakes.model_server import FakeModelServer, Reply
from tests.helpers import python_in

# Modules a one-shot turn never calls into: the review's planner and its loops, the
# chat deliveries' worker, the shell parser of the hardline check, fetch_url's HTML
# reduction and SSRF guard, the HTTP server's app, the MCP client, the terminal app.
DEFERRED = (
    "habakkuk.knowledge.review",
    "habakkuk.knowledge.review_wiring",
    "habakkuk.knowledge.embed_loop",
    "habakkuk.channels.deliveries",
    "habakkuk.tools.hardline",
    "habakkuk.tools.html_text",
    "habakkuk.tools.netguard",
    "html.parser",
    "habakkuk.channels.service",
    "habakkuk.protocols.mcp.manager",
    "habakkuk.app",
    "textual",
    # The openai SDK's modules of endpoints a Chat Completions call never touches (each
    # pulls in dozens more): lazy_types defers its type packages. Should a new SDK load
    # its types some other way, this fails and the deferral needs another look.
    "openai.types.batch",
    "openai.types.eval_create_params",
    "openai.types.responses.response",
    "openai.types.beta",
    # A name read from a type package comes from the one submodule defining it: the rest of
    # the package's `__init__` (a hundred chat types) stays unrun.
    "openai.types.chat.chat_completion_deleted",
    "openai.types.chat.chat_completion_store_message",
    # A one-shot run's client sends through httpx2's own transport (sdk_http.py): aiohttp,
    # its client stack and its certificate contexts, stay unloaded; the SDK's vendored
    # aiohttp transport package is deferred, so reading its client class loads nothing.
    "aiohttp",
    "openai._vendor.httpx_aiohttp.transport",
    # The secret detector's patterns: a turn that stores no memory never reads them.
    "habakkuk.engine.secret_scan",
    # The chat commands' package (its __init__ registers every command): the approvals
    # service reads an answer's wording from it only when a chat is told of one.
    "habakkuk.conversation",
    # What no agent of the home uses: the meeting desk (no agent lists the toolset), the
    # desktops' module (no desktop ever started here), apply_patch's parser (not called).
    "habakkuk.tools.meeting.desk",
    "habakkuk.tools.computer.xvfb",
    "habakkuk.tools.patching",
    "habakkuk.protocols.nodes.hub",  # no `nodes:` section: no device hub
    # HTTP/2: httpx2's transport sends HTTP/1.1 (h11) unless asked for HTTP/2.
    "h2",
    "anthropic",
    "botocore",  # only a Bedrock provider's call imports it
)
# Every module of the package imported: each kind any of them declares.
ALL_KINDS = (
    "import importlib, pkgutil\nimport habakkuk\n"
    "from habakkuk.engine.jobs import declared_kinds\n"
    "for found in pkgutil.walk_packages(habakkuk.__path__, 'habakkuk.'):\n"
    "    importlib.import_module(found.name)\n"
    "print('KINDS', ' '.join(declared_kinds()))\n"
)


def after(out: str, label: str) -> list[str]:
    """The words printed after `label ` on its line."""
    line = next(line for line in out.splitlines() if line.startswith(f"{label} "))
    return line.split()[1:]


async def test_a_one_shot_run_leaves_what_its_turn_never_calls_unloaded_and_knows_every_kind(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    (tmp_path / "config.yaml").write_text(
        "providers:\n"
        f"  remote: {{type: openai, base_url: '{model_server.base_url}/v1', key_env: K}}\n"
        "agents:\n  main: {model: remote/gpt-fake, mode: full}\n",
        encoding="utf-8",
    )
    model_server.script(Reply(text="hello from the model"))
    code = (
        "import sys\nfrom habakkuk.cli import main\ncode = main(['run', 'hi'])\n"
        "from habakkuk.engine.jobs import declared_kinds\n"
        "print()\nprint('EXIT', code)\n"
        "print('LOADED', ' '.join(sorted(sys.modules)))\n"
        "print('KINDS', ' '.join(declared_kinds()))\n"
    )
    status, out, err = await python_in(code, tmp_path, K="sk-test")
    assert status == 0, err
    assert "hello from the model" in out
    assert after(out, "EXIT") == ["0"]
    loaded = set(after(out, "LOADED"))
    assert {"habakkuk.runtime", "openai", "openai.types"} <= loaded
    assert [name for name in DEFERRED if name in loaded] == []
    body = model_server.requests[-1].json
    assert body["messages"][-1]["role"] == "user"
    assert body["messages"][-1]["content"].startswith("hi")
    assert len(body["tools"]) > 10  # full mode: the agent's tools went out

    status, every, err = await python_in(ALL_KINDS, tmp_path)
    assert status == 0, err
    assert "memory_review" in after(every, "KINDS")  # the walk reached the handlers
    assert after(out, "KINDS") == after(every, "KINDS")
