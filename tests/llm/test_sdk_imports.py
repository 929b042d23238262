"""A one-shot turn imports only the parts of the model SDKs its call uses.

`habakkuk run` in a fresh process against the fake model server answers as before and
leaves the SDK's other type modules unloaded (engine/llm/adapters/lazy_types.py); a
deferred package still gives every name it defines. Should a new SDK version load its
types some other way, the first test fails and the deferral needs another look.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.fakes.model_server import FakeModelServer, Reply

BOUND = 120.0  # seconds: a cold-started process on a loaded machine
# Modules of endpoints a Chat Completions call never touches (each pulls in dozens more).
UNUSED = (
    "openai.types.batch",
    "openai.types.eval_create_params",
    "openai.types.responses.response",
    "openai.types.beta",
    "anthropic",
)


async def python(code: str, home: Path, **env: str) -> tuple[int, str, str]:
    """Run `code` in a fresh interpreter on `home`: exit status, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HABAKKUK_HOME": str(home), **env},
    )
    out, err = await asyncio.wait_for(process.communicate(), BOUND)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_one_shot_run_leaves_the_sdk_types_it_does_not_use_unloaded(
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
        "loaded = sorted(m for m in sys.modules if m.startswith(('openai', 'anthropic')))\n"
        "print('EXIT', code)\nprint('LOADED', ' '.join(loaded))\n"
    )
    status, out, err = await python(code, tmp_path, K="sk-test")
    assert status == 0, err
    assert "hello from the model" in out
    assert "EXIT 0" in out
    loaded = out.split("LOADED ", 1)[1].split()
    assert "openai" in loaded and "openai.types" in loaded
    assert [m for m in UNUSED if m in loaded] == []
    body = model_server.requests[-1].json
    assert body["messages"][-1]["role"] == "user"
    assert body["messages"][-1]["content"].startswith("hi")
    assert len(body["tools"]) > 10  # full mode: the agent's tools went out


async def test_a_deferred_type_package_still_gives_every_name(tmp_path: Path) -> None:
    code = (
        "from habakkuk.engine.llm.adapters.lazy_types import defer_type_packages\n"
        "defer_type_packages()\n"
        "import openai\n"
        "from openai.types import Batch\n"
        "from openai.types.chat import ChatCompletionChunk\n"
        "from openai.types.responses import Response\n"
        "import openai.types.batch, openai.types.chat.chat_completion_chunk\n"
        "assert Batch is openai.types.batch.Batch\n"
        "chunk = openai.types.chat.chat_completion_chunk\n"
        "assert ChatCompletionChunk is chunk.ChatCompletionChunk\n"
        "assert openai.types.chat.ChatCompletion.__name__ == 'ChatCompletion'\n"
        "assert 'Response' in dir(openai.types.responses) and Response.__name__ == 'Response'\n"
        "try:\n    openai.types.no_such_name\nexcept AttributeError:\n    print('MISSING OK')\n"
    )
    status, out, err = await python(code, tmp_path)
    assert status == 0, err
    assert "MISSING OK" in out
