"""The declared fields of /v1 request bodies, checked before anything runs.

Each endpoint's fields that OpenAI defines are checked for their type and range,
whether Habakkuk uses them (`stream`, `stream_options`, `user`) or accepts and
ignores them (`temperature`, `top_p`, `store`...), so a client's mistake is a 400
naming the field (`param`) instead of a turn run with a surprise. Fields OpenAI
does not define are tolerated: OpenAI-compatible clients add their own.
`messages`, `input` and `model` are read (and checked) by the handlers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import ApiError

Check = Callable[[Any], bool]


def _bool(value: Any) -> bool:
    return isinstance(value, bool)


def _string(value: Any) -> bool:
    return isinstance(value, str)


def _number(low: float, high: float) -> Check:
    def check(value: Any) -> bool:
        return (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and (low <= value <= high)
        )

    return check


def _integer(low: int, high: int | None = None) -> Check:
    def check(value: Any) -> bool:
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        return value >= low and (high is None or value <= high)

    return check


def _object(value: Any) -> bool:
    return isinstance(value, dict)


def _metadata(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and len(value) <= 16
        and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    )


def _stop(value: Any) -> bool:
    if isinstance(value, str):
        return True
    return isinstance(value, list) and len(value) <= 4 and all(isinstance(v, str) for v in value)


def _tool_choice(value: Any) -> bool:
    return isinstance(value, (str, dict))


def _one(value: Any) -> bool:
    return value == 1 and not isinstance(value, bool)


Field = tuple[Check, str]
COMMON: dict[str, Field] = {
    "model": (_string, "a string (habakkuk/<agent>)"),
    "stream": (_bool, "true or false"),
    "store": (_bool, "true or false"),
    "temperature": (_number(0, 2), "a number from 0 to 2"),
    "top_p": (_number(0, 1), "a number from 0 to 1"),
    "user": (_string, "a string"),
    "metadata": (_metadata, "an object of at most 16 string values"),
    "parallel_tool_calls": (_bool, "true or false"),
    "tool_choice": (_tool_choice, "a string or an object"),
    "service_tier": (_string, "a string"),
    "safety_identifier": (_string, "a string"),
    "prompt_cache_key": (_string, "a string"),
    "top_logprobs": (_integer(0, 20), "an integer from 0 to 20"),
}
CHAT: dict[str, Field] = {
    **COMMON,
    "messages": (lambda v: isinstance(v, list), "a list of messages"),
    "max_tokens": (_integer(1), "a positive integer"),
    "max_completion_tokens": (_integer(1), "a positive integer"),
    "n": (_one, "1 (one choice per request)"),
    "stream_options": (_object, "an object"),
    "presence_penalty": (_number(-2, 2), "a number from -2 to 2"),
    "frequency_penalty": (_number(-2, 2), "a number from -2 to 2"),
    "logit_bias": (_object, "an object"),
    "logprobs": (_bool, "true or false"),
    "seed": (_integer(-(2**63), 2**63 - 1), "an integer"),
    "stop": (_stop, "a string or a list of at most 4 strings"),
    "response_format": (_object, "an object"),
    "reasoning_effort": (_string, "a string"),
}
RESPONSES: dict[str, Field] = {
    **COMMON,
    "input": (lambda v: isinstance(v, (str, list)), "a string or a list of messages"),
    "instructions": (_string, "a string"),
    "previous_response_id": (_string, "a string"),
    "max_output_tokens": (_integer(1), "a positive integer"),
    "reasoning": (_object, "an object"),
    "text": (_object, "an object"),
    "truncation": (_string, "a string"),
    "include": (lambda v: isinstance(v, list), "a list"),
    "background": (_bool, "true or false"),
}


def _check(body: dict[str, Any], fields: dict[str, Field]) -> None:
    for name, (check, wanted) in fields.items():
        value = body.get(name)
        # OpenAI's clients send null for a field left unset.
        if value is not None and not check(value):
            raise ApiError(400, f"{name} must be {wanted}", param=name)


def check_chat_request(body: dict[str, Any]) -> None:
    """POST /v1/chat/completions: ApiError 400 (with `param`) for a malformed field."""
    _check(body, CHAT)
    options = body.get("stream_options")
    if options is not None:
        usage = options.get("include_usage")
        if usage is not None and not isinstance(usage, bool):
            raise ApiError(
                400,
                "stream_options.include_usage must be true or false",
                param="stream_options.include_usage",
            )


def check_responses_request(body: dict[str, Any]) -> None:
    """POST /v1/responses: ApiError 400 (with `param`) for a malformed field."""
    _check(body, RESPONSES)
