"""`telemetry:`: OTLP/HTTP trace export (spec 000 "Operations": Traces), and its checks.

Spans go to `<otlp_endpoint>/v1/traces`; `headers_env` names a variable holding headers
in the OTEL_EXPORTER_OTLP_HEADERS form (`k=v,k2=v2`), read like any other secret.
Content (the user message, the reply, tool input and output) is sent only with
`include_content: true`. Each mistake is a ConfigError naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from .config_schema import line_of
from .errors import ConfigError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class TelemetryConfig:
    """`telemetry`: where traces go and what they may carry."""

    otlp_endpoint: str
    include_content: bool = False
    service_name: str = "habakkuk"
    headers_env: str | None = None
    traces_url: str = field(default="", init=False)  # <endpoint>/v1/traces


def resolve_telemetry(telemetry: TelemetryConfig, path: Path) -> None:
    """Check every value and derive the traces URL (ConfigError naming the line)."""

    def error(key: str, message: str) -> ConfigError:
        return ConfigError(f"{path}:{line_of(telemetry, key)}: telemetry.{key}: {message}")

    endpoint = telemetry.otlp_endpoint.strip().rstrip("/")
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise error(
            "otlp_endpoint", "must be an http:// or https:// URL, e.g. http://127.0.0.1:4318"
        )
    if parts.query or parts.fragment:
        raise error("otlp_endpoint", "must be a plain URL (no ?query or #fragment)")
    telemetry.traces_url = endpoint if endpoint.endswith("/v1/traces") else f"{endpoint}/v1/traces"
    if not telemetry.service_name.strip():
        raise error("service_name", "must not be empty")
    if telemetry.headers_env is not None and not _NAME.match(telemetry.headers_env):
        raise error("headers_env", f"{telemetry.headers_env!r} is not a variable name")


def parse_headers(text: str) -> dict[str, str]:
    """Headers from the OTEL_EXPORTER_OTLP_HEADERS form: `key=value` pairs separated by
    commas, each part percent-decoded; pairs without `=` are skipped."""
    from urllib.parse import unquote

    headers: dict[str, str] = {}
    for pair in text.split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip():
            headers[unquote(key.strip())] = unquote(value.strip())
    return headers
