"""Agent Cards: the home's card (every served agent a skill) and each agent's own.

The card is in 0.3 shape (url, preferredTransport, security) unless the caller asks for
1.0 (supportedInterfaces, securityRequirements). The 0.3 card also lists both interfaces
under supportedInterfaces, which 0.3 readers ignore and 1.0 readers prefer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .wire import Version

SCHEME = "bearer"
MODES = ["text/plain", "application/json"]


@dataclass(frozen=True)
class CardSpec:
    """What a card says: who, where, which skills, whether a token is asked."""

    name: str
    description: str
    url: str  # the JSON-RPC endpoint
    skills: dict[str, str]  # agent -> description
    version: str
    token: bool


def card(spec: CardSpec, version: Version) -> dict[str, Any]:
    """The card in `version`'s shape."""
    skills = [
        {
            "id": name,
            "name": name,
            "description": description,
            "tags": ["habakkuk"],
            "inputModes": MODES,
            "outputModes": ["text/plain"],
        }
        for name, description in spec.skills.items()
    ]
    interfaces = [
        {"url": spec.url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": spec.url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
    ]
    body: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        "version": spec.version,
        "provider": {"organization": "Habakkuk", "url": "https://github.com/habakkuk"},
        "capabilities": {"streaming": True, "pushNotifications": False},
        "defaultInputModes": MODES,
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
        "supportedInterfaces": interfaces,
    }
    if version == "1.0":
        if spec.token:
            body["securitySchemes"] = {SCHEME: {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
            body["securityRequirements"] = [{"schemes": {SCHEME: {"list": []}}}]
        return body
    body |= {
        "protocolVersion": "0.3.0",
        "url": spec.url,
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [{"url": spec.url, "transport": "JSONRPC"}],
    }
    if spec.token:
        body["securitySchemes"] = {SCHEME: {"type": "http", "scheme": "bearer"}}
        body["security"] = [{SCHEME: []}]
    return body


def wants_v1(accept_version: str | None, query_version: str | None) -> bool:
    """Whether the card request asks for the 1.0 shape (A2A-Version header or ?version)."""
    given = (accept_version or query_version or "").strip()
    return given.startswith("1")
