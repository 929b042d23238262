"""A deferred type package of the openai SDK (engine/llm/adapters/lazy_types.py), and
httpcore2 deferred the same way, still give every name they define; the certificate
context new_client hands the SDK is httpcore2's own (tls_context.py). That a one-shot run
leaves the SDK's other type modules (and httpcore2's engine) unloaded is checked with the
rest of what it leaves unloaded, in tests/cli/test_run_start.py.
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


async def test_deferred_httpcore2_still_gives_every_name_and_its_context_function_is_where_pinned(
    tmp_path: Path,
) -> None:
    # tls_context.py imports httpcore2's default_ssl_context from its private module
    # `_ssl` (httpcore2 is pinned exactly): this fails when an upgrade moves it.
    code = (
        "from habakkuk.engine.llm.adapters.lazy_types import defer_type_packages\n"
        "defer_type_packages()\n"
        "import sys, ssl\n"
        "from habakkuk.engine.llm.adapters.tls_context import default_tls_context\n"
        "context = default_tls_context()\n"
        "assert isinstance(context, ssl.SSLContext), context\n"
        "assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname\n"
        "print('ENGINE LOADED', 'httpcore2._api' in sys.modules)\n"
        "import httpcore2, httpcore2._ssl\n"
        "assert httpcore2._ssl.default_ssl_context is httpcore2.default_ssl_context\n"
        "from httpcore2 import AsyncConnectionPool\n"
        "assert AsyncConnectionPool.__name__ == 'AsyncConnectionPool'\n"
        "assert 'AsyncConnectionPool' in dir(httpcore2)\n"
    )
    status, out, err = await python_in(code, tmp_path)
    assert status == 0, err
    assert "ENGINE LOADED False" in out
