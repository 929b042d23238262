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


async def test_a_name_of_a_type_package_loads_only_the_submodule_defining_it(
    tmp_path: Path,
) -> None:
    # The SDK's own `openai.lib` reads `openai.types.chat.X` as it loads: that costs the
    # one module defining X, and the package's other hundred types wait until someone
    # asks for a name the `__init__` does not re-export (dir() here), as before.
    code = (
        "from habakkuk.engine.llm.adapters.lazy_types import defer_type_packages\n"
        "defer_type_packages()\n"
        "import sys, openai\n"
        "from openai.types.chat import ChatCompletionChunk, chat_completion_message\n"
        "chunk = sys.modules['openai.types.chat.chat_completion_chunk']\n"
        "assert ChatCompletionChunk is chunk.ChatCompletionChunk\n"
        "message = sys.modules['openai.types.chat.chat_completion_message']\n"
        "assert chat_completion_message is message\n"
        "print('BEFORE DIR', 'openai.types.chat.chat_completion_deleted' in sys.modules)\n"
        "assert 'ChatCompletionDeleted' in dir(openai.types.chat)\n"
        "print('AFTER DIR', 'openai.types.chat.chat_completion_deleted' in sys.modules)\n"
        "from openai.types.chat import ChatCompletionDeleted\n"
        "assert ChatCompletionDeleted.__module__ == 'openai.types.chat.chat_completion_deleted'\n"
    )
    status, out, err = await python_in(code, tmp_path)
    assert status == 0, err
    assert "BEFORE DIR False" in out
    assert "AFTER DIR True" in out


async def test_a_serving_process_sends_through_aiohttp_and_a_one_shot_run_through_httpx2(
    tmp_path: Path,
) -> None:
    # `import openai` reads the vendored aiohttp package's client class only: aiohttp
    # loads when a client sending through it is made, which a one-shot run never does.
    code = (
        "from habakkuk.engine.llm.adapters.lazy_types import defer_type_packages\n"
        "defer_type_packages()\n"
        "import sys, ssl, openai\n"
        "from habakkuk.engine.llm.adapters.sdk_http import sdk_http_client, send_one_shot\n"
        "print('AFTER IMPORT', 'aiohttp' in sys.modules)\n"
        "send_one_shot()\n"
        "light = sdk_http_client(5.0)\n"
        "assert isinstance(light, openai.DefaultAsyncHttpxClient), type(light)\n"
        "assert not isinstance(light, openai.DefaultAioHttpClient)\n"
        "print('ONE SHOT', 'aiohttp' in sys.modules)\n"
        "import habakkuk.engine.llm.adapters.sdk_http as sdk_http\n"
        "sdk_http._ONE_SHOT[0] = False\n"
        "served = sdk_http_client(5.0)\n"
        "assert isinstance(served, openai.DefaultAioHttpClient), type(served)\n"
        "print('SERVING', 'aiohttp' in sys.modules)\n"
    )
    status, out, err = await python_in(code, tmp_path)
    assert status == 0, err
    assert "AFTER IMPORT False" in out
    assert "ONE SHOT False" in out
    assert "SERVING True" in out
