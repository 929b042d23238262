"""A deferred type package of the openai SDK (engine/llm/adapters/lazy_types.py) still
gives every name it defines. That a one-shot run leaves the SDK's other type modules
unloaded is checked with the rest of what it leaves unloaded, in tests/cli/test_run_start.py.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import python_in


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
    status, out, err = await python_in(code, tmp_path)
    assert status == 0, err
    assert "MISSING OK" in out
