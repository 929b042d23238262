"""The Gemini API's wire for the fake model server (``POST /v1beta/models/{model}:...``).

``streamGenerateContent?alt=sse`` answers server-sent events, each ``data:`` one
GenerateContentResponse JSON (lines end in CRLF, as Google's front end sends them):
text and thought summaries piece by piece, parallel function calls whole in one
event, ``usageMetadata`` on every event (the prompt count includes cached tokens)
and ``finishReason`` on the last. Errors are Google's error object
(``{"error": {"code", "message", "status", "details"}}``) with the real messages.

Thought signatures as the real service gives them: a Gemini 3 model (and a 2.5 model
asked to think) signs the first function call of a reply, else its last part (an
empty text part at the end of the stream). The request checks are the real ones a
fake must not skip: a Gemini 3 request whose current turn holds a model turn with
calls but no signature on its first call is refused with the API's 400, as is a
signature the server never issued (the documented bypass value passes); each model
turn with calls is answered by as many functionResponse parts in the next turn;
roles are ``user`` and ``model``; parts hold one datum each; inline data is base64;
thinkingLevel is refused on 2.5 models and with a thinkingBudget.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

BYPASS = "skip_thought_signature_validator"
_DATA_FIELDS = (
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
)
_MODEL = re.compile(r"^gemini-(\d+)(?:\.(\d+))?")
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def fake_gemini_signature(seed: str) -> str:
    """A signature the fake issues (opaque base64, as the real ones are)."""
    digest = hashlib.sha256(b"fake-gemini-signature\0" + seed.encode()).digest()
    return base64.b64encode(b"gsig" + digest).decode()


def _version(model: str) -> tuple[int, int] | None:
    match = _MODEL.match(model)
    return (int(match.group(1)), int(match.group(2) or 0)) if match else None


def is_strict(model: str) -> bool:
    """Gemini 3 and later validate the signatures of the current turn's calls."""
    version = _version(model)
    return version is not None and version >= (3, 0)


# -- errors ---------------------------------------------------------------------------


def error_body(
    code: int, message: str, status: str | None = None, details: list[Any] | None = None
) -> dict[str, Any]:
    """Google's error object."""
    error: dict[str, Any] = {
        "code": code,
        "message": message,
        "status": status
        or _STATUS_NAMES.get(code, "UNKNOWN" if code >= 500 else "INVALID_ARGUMENT"),
    }
    if details:
        error["details"] = details
    return {"error": error}


def retry_info(seconds: float) -> dict[str, Any]:
    text = str(int(seconds)) if seconds == int(seconds) else str(seconds)
    return {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{text}s"}


def fail_body(status: int, kind: str, retry_after: float | None, message: str) -> dict[str, Any]:
    """The real error body of a Fail (``kind`` as the fake model server names them)."""
    if kind == "" and status == 429:
        kind = "rate_limit"
    if kind == "" and status in (503, 529):
        kind = "overloaded"
    if kind == "rate_limit":
        details: list[Any] = [
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {
                        "quotaMetric": "generativelanguage.googleapis.com/"
                        "generate_content_free_tier_requests",
                        "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                        "quotaValue": "10",
                    }
                ],
            },
            {
                "@type": "type.googleapis.com/google.rpc.Help",
                "links": [
                    {
                        "description": "Learn more",
                        "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
                    }
                ],
            },
        ]
        if retry_after is not None:
            details.append(retry_info(retry_after))
        text = (
            "You exceeded your current quota, please check your plan and billing details. "
            "For more information on this error, head to: "
            "https://ai.google.dev/gemini-api/docs/rate-limits."
        )
        return error_body(status, message or text, "RESOURCE_EXHAUSTED", details)
    if kind == "overloaded":
        details = [retry_info(retry_after)] if retry_after is not None else []
        text = "The model is overloaded. Please try again later."
        return error_body(status, message or text, "UNAVAILABLE", details)
    if kind == "auth" or (kind == "" and status == 401):
        if status in (401, 403):
            text = (
                "Method doesn't allow unregistered callers (callers without established "
                "identity). Please use API Key or other form of API consumer identity."
            )
            return error_body(status, message or text)
        info = {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID",
            "domain": "googleapis.com",
            "metadata": {"service": "generativelanguage.googleapis.com"},
        }
        text = "API key not valid. Please pass a valid API key."
        return error_body(status, message or text, "INVALID_ARGUMENT", [info])
    if kind == "billing":
        if status == 429:
            text = (
                "Your prepayment credits are depleted. Please go to AI Studio at "
                "https://ai.studio/projects to manage your project and billing."
            )
            return error_body(status, message or text, "RESOURCE_EXHAUSTED")
        text = (
            "Gemini API free tier is not available in your country. Please enable billing "
            "on your project in Google AI Studio."
        )
        return error_body(status, message or text, "FAILED_PRECONDITION")
    if kind == "context_overflow":
        text = (
            "The input token count (1048577) exceeds the maximum number of tokens allowed "
            "(1048576)."
        )
        return error_body(status, message or text, "INVALID_ARGUMENT")
    if status == 404:
        text = (
            "models/fake is not found for API version v1beta, or is not supported for "
            "generateContent. Call ListModels to see the list of available models and "
            "their supported methods."
        )
        return error_body(status, message or text)
    if status >= 500:
        text = (
            "An internal error has occurred. Please retry or report in "
            "https://developers.generativeai.google/guide/troubleshooting"
        )
        return error_body(status, message or text)
    return error_body(status, message or "Request contains an invalid argument.")


# -- request checks -----------------------------------------------------------------------


def _invalid(message: str) -> dict[str, Any]:
    return error_body(400, message, "INVALID_ARGUMENT")


def request_problem(body: Any, model: str, issued: set[str]) -> dict[str, Any] | None:
    """The API's 400 body for a malformed request, or None."""
    if not isinstance(body, dict):
        return _invalid("Invalid JSON payload received.")
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return _invalid("* GenerateContentRequest.contents: contents is not specified\n")
    problem = _config_problem(body.get("generationConfig"), model)
    if problem is None:
        problem = _contents_problem(contents)
    if problem is None and is_strict(model):
        problem = _signature_problem(contents, issued)
    return _invalid(problem) if problem else None


def _config_problem(config: Any, model: str) -> str | None:
    thinking = (config or {}).get("thinkingConfig") if isinstance(config, dict) else None
    if not isinstance(thinking, dict):
        return None
    if "thinkingLevel" in thinking and "thinkingBudget" in thinking:
        return "You can only set only one of thinking budget and thinking level."
    version = _version(model)
    if "thinkingLevel" in thinking and (version is None or version < (3, 0)):
        return "Thinking level is not supported for this model."
    return None


def _contents_problem(contents: list[Any]) -> str | None:
    for index, content in enumerate(contents):
        where = f"contents[{index}]"
        if not isinstance(content, dict) or content.get("role") not in ("user", "model"):
            return f"Please use a valid role: user, model. ({where})"
        parts = content.get("parts")
        if not isinstance(parts, list) or not parts:
            return f"* GenerateContentRequest.{where}.parts: contents.parts must not be empty.\n"
        for position, part in enumerate(parts):
            fields = [f for f in _DATA_FIELDS if isinstance(part, dict) and f in part]
            if len(fields) != 1:
                return (
                    f"* GenerateContentRequest.{where}.parts[{position}].data: required oneof "
                    "field 'data' must have one initialized field\n"
                )
            if fields[0] == "inlineData":
                problem = _inline_problem(part["inlineData"], f"{where}.parts[{position}]")
                if problem:
                    return problem
        calls = sum(1 for p in parts if "functionCall" in p)
        if calls and content["role"] == "model":
            following = contents[index + 1] if index + 1 < len(contents) else None
            answers = sum(1 for p in (following or {}).get("parts", []) if "functionResponse" in p)
            if following is not None and answers != calls:
                return (
                    "Please ensure that the number of function response parts is equal to "
                    "the number of function call parts of the function call turn."
                )
    return None


def _inline_problem(data: Any, where: str) -> str | None:
    if not isinstance(data, dict) or not data.get("mimeType"):
        return f"* GenerateContentRequest.{where}.inline_data.mime_type: must be set\n"
    try:
        base64.b64decode(str(data.get("data", "")), validate=True)
    except (binascii.Error, ValueError):
        return f"Invalid value at '{where}.inline_data.data' (TYPE_BYTES), Base64 decoding failed"
    return None


def _signature_problem(contents: list[Any], issued: set[str]) -> str | None:
    """Gemini 3's check: the first call of each model turn of the current turn (after
    the last user text) carries a signature the service issued, or the bypass value."""
    start = 0
    for index, content in enumerate(contents):
        if content["role"] == "user" and any("text" in p for p in content["parts"]):
            start = index
    for index in range(start, len(contents)):
        content = contents[index]
        if content["role"] != "model":
            continue
        calls = [(i, p) for i, p in enumerate(content["parts"]) if "functionCall" in p]
        if not calls:
            continue
        position, first = calls[0]
        signature = first.get("thoughtSignature")
        if not signature:
            name = first["functionCall"].get("name", "")
            return (
                "Function call is missing a thought_signature in functionCall parts. This is "
                "required for tools to work correctly, and missing thought_signature may lead "
                "to degraded model performance. Additional data, function call "
                f"`default_api:{name}` , position {position + 1}. Please refer to "
                "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
            )
        if signature != BYPASS and signature not in issued:
            return "Corrupted thought signature."
    return None


# -- answers -----------------------------------------------------------------------------


@dataclass
class GeminiPlan:
    """What one scripted reply streams, as GenerateContentResponse events."""

    model: str
    response_id: str
    text: str
    thinking: str
    calls: list[tuple[str, dict[str, Any]]]
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    chunk_size: int
    stop: str
    signs: bool
    include_thoughts: bool
    issued: list[str] = field(default_factory=list)

    def usage(self, final: bool) -> dict[str, Any]:
        prompt = self.input_tokens + self.cached_tokens
        usage: dict[str, Any] = {"promptTokenCount": prompt}
        if final:
            usage["candidatesTokenCount"] = self.output_tokens
            usage["totalTokenCount"] = prompt + self.output_tokens
            if self.cached_tokens:
                usage["cachedContentTokenCount"] = self.cached_tokens
        else:
            usage["totalTokenCount"] = prompt
        usage["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": prompt}]
        return usage

    def event(self, parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return {
            "candidates": [candidate],
            "usageMetadata": self.usage(final=finish is not None),
            "modelVersion": self.model,
            "responseId": self.response_id,
        }

    def sign(self, seed: str) -> str:
        signature = fake_gemini_signature(f"{self.response_id}\0{seed}")
        self.issued.append(signature)
        return signature

    def events(self) -> list[tuple[dict[str, Any], bool]]:
        """(event, is a content delta) pairs; the last one finishes the reply."""
        out: list[tuple[dict[str, Any], bool]] = []
        size = self.chunk_size
        if self.thinking and self.include_thoughts:
            for i in range(0, len(self.thinking), size):
                piece = self.thinking[i : i + size]
                out.append((self.event([{"text": piece, "thought": True}]), True))
        for i in range(0, len(self.text), size):
            out.append((self.event([{"text": self.text[i : i + size]}]), True))
        if self.calls:
            parts: list[dict[str, Any]] = []
            for index, (name, args) in enumerate(self.calls):
                part: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
                if index == 0 and self.signs:
                    part["thoughtSignature"] = self.sign(f"call\0{name}")
                parts.append(part)
            out.append((self.event(parts), True))
        last: list[dict[str, Any]] = [{"text": ""}]
        if self.signs and not self.calls:
            last[0]["thoughtSignature"] = self.sign(f"text\0{self.text}")
        out.append((self.event(last, self.stop), False))
        return out


def finish_reason(stop: str | None) -> str:
    """The API's finishReason of a Reply's stop_reason."""
    if stop is None or stop in ("end_turn", "stop", "tool_use", "tool_calls"):
        return "STOP"
    if stop in ("max_tokens", "length", "max_output_tokens"):
        return "MAX_TOKENS"
    return stop.upper()


def signs(model: str, body: dict[str, Any]) -> bool:
    """Whether the model's reply carries signatures (Gemini 3; 2.5 when thinking)."""
    if is_strict(model):
        return True
    thinking = (body.get("generationConfig") or {}).get("thinkingConfig") or {}
    return bool(thinking.get("thinkingBudget"))


def includes_thoughts(body: dict[str, Any]) -> bool:
    thinking = (body.get("generationConfig") or {}).get("thinkingConfig") or {}
    return thinking.get("includeThoughts") is True


def sse(event: dict[str, Any]) -> bytes:
    """One server-sent event as Google's front end frames it."""
    return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\r\n\r\n"
