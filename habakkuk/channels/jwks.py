"""RS256 bearer tokens checked against a platform's published keys (Teams, Google Chat).

Microsoft's Bot Connector and Google Chat sign every request they make to a bot with a
JWT (RS256); the public keys are published as a JSON Web Key Set. `KeySet` keeps those
keys in memory: fetched once, refetched when a token names a key id we do not hold (keys
rotate) but at most once a minute (so a flood of tokens with made-up key ids cannot make
us hammer the platform), and refetched after a day in any case. `check` is synchronous
and uses the cached keys only, so the cost of a request is one RSA signature check.

Only RS256 is accepted: a token saying `alg: none`, or HS256 (whose "secret" an attacker
would pick to be our public key), is refused before any key is looked at. PyJWT does the
signature and the registered claims (exp, nbf, iat, iss, aud, with the platform's clock
skew as leeway); the caller checks its platform's own claims on the result.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import jwt

log = logging.getLogger(__name__)

REFETCH_SECONDS = 60.0  # an unknown key id refetches the keys at most this often
KEYS_SECONDS = 24 * 3600.0  # keys held longer than this are refetched on the next request
ALGORITHM = "RS256"


@dataclass(frozen=True)
class TokenRules:
    """What a platform's tokens must say: who signed them for whom."""

    issuers: tuple[str, ...]
    audiences: tuple[str, ...]
    leeway: float = 300.0  # the platforms allow five minutes of clock skew


@dataclass(frozen=True)
class Verified:
    """A token whose signature and registered claims checked out."""

    claims: Mapping[str, Any]
    # the channels the signing key is endorsed for (Bot Framework's keys carry them)
    endorsements: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Key:
    key: Any  # the RSA public key PyJWT verifies with
    endorsements: tuple[str, ...]


def bearer(headers: Mapping[str, str]) -> str:
    """The token of an `Authorization: Bearer <token>` header, or ""."""
    value = headers.get("Authorization") or headers.get("authorization") or ""
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


@dataclass
class KeySet:
    """The keys published at `jwks_url` (or at the `jwks_uri` the OpenID metadata at
    `metadata_url` names), cached."""

    jwks_url: str = ""
    metadata_url: str = ""
    clock: Callable[[], float] = time.monotonic
    fetches: int = 0  # how often the keys were fetched (tests and the benchmark read it)
    _keys: dict[str, _Key] = field(default_factory=dict)
    _fetched_at: float | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def ready_for(self, token: str, http: aiohttp.ClientSession) -> None:
        """Make sure the key `token` names is held, fetching the keys when it is not (at
        most once a minute) or when they are a day old. ConnectionError when the keys
        were never fetched and cannot be now (the caller answers 503: retry later)."""
        header = _header(token)
        if header is None:
            return  # not a token at all: `check` refuses it without any key
        kid = str(header.get("kid", ""))
        if not self._due(kid):
            return
        # One fetch at a time: requests that arrive while it runs wait for its keys.
        async with self._lock:
            if not self._due(kid):
                return
            try:
                await self.fetch(http)
            except ConnectionError:
                if not self._keys:
                    raise
                log.warning("could not refetch the signing keys at %s", self._source)

    def _due(self, kid: str) -> bool:
        """Whether the keys are to be fetched for a token naming `kid`: never fetched, a
        day old, or `kid` unknown and the last fetch a minute ago."""
        if self._fetched_at is None:
            return True
        age = self.clock() - self._fetched_at
        return age >= KEYS_SECONDS or (kid not in self._keys and age >= REFETCH_SECONDS)

    @property
    def _source(self) -> str:
        return self.jwks_url or self.metadata_url

    async def fetch(self, http: aiohttp.ClientSession) -> None:
        """Fetch the key set now; ConnectionError when it cannot be read."""
        self._fetched_at = self.clock()  # a failure also waits its minute
        url = self.jwks_url or str((await _get_json(http, self.metadata_url)).get("jwks_uri", ""))
        if not url:
            raise ConnectionError(f"{self.metadata_url}: the OpenID metadata names no jwks_uri")
        found = await _get_json(http, url)
        keys: dict[str, _Key] = {}
        for jwk in found.get("keys") or []:
            if not isinstance(jwk, dict) or jwk.get("kty") != "RSA" or not jwk.get("kid"):
                continue
            try:
                key = jwt.PyJWK(jwk, ALGORITHM).key
            except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
                log.warning("%s: skipped an unreadable key %s", url, jwk.get("kid"))
                continue
            endorsements = jwk.get("endorsements")
            named = tuple(str(e) for e in endorsements) if isinstance(endorsements, list) else ()
            keys[str(jwk["kid"])] = _Key(key, named)
        self._keys = keys
        self.fetches += 1

    def check(self, token: str, rules: TokenRules) -> Verified | None:
        """The token's claims when it is an RS256 token signed by a held key, for one of
        `rules.audiences`, from one of `rules.issuers`, and not expired; else None."""
        header = _header(token)
        if header is None or header.get("alg") != ALGORITHM:
            return None
        held = self._keys.get(str(header.get("kid", "")))
        if held is None:
            return None
        try:
            claims = jwt.decode(
                token,
                held.key,
                algorithms=[ALGORITHM],
                audience=list(rules.audiences),
                issuer=_issuers(rules.issuers),
                leeway=rules.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.InvalidTokenError:
            return None
        return Verified(claims, held.endorsements)


def _header(token: str) -> dict[str, Any] | None:
    """The token's header, read only to pick the key (PyJWT's decode checks the whole
    token again); None when it is not a JWT. Cheaper than PyJWT's own reader, which
    validates every character of the signature too, on every call."""
    head, dot, _ = token.partition(".")
    if not dot or len(head) > 4096:
        return None
    try:
        found = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, binascii.Error):
        return None
    return found if isinstance(found, dict) else None


def _issuers(issuers: Sequence[str]) -> str | Sequence[str]:
    return issuers[0] if len(issuers) == 1 else list(issuers)


async def _get_json(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    try:
        async with http.get(url) as response:
            if response.status != 200:
                raise ConnectionError(f"{url}: HTTP {response.status}")
            found = await response.json(content_type=None)
    except (aiohttp.ClientError, ValueError, TimeoutError) as exc:
        raise ConnectionError(f"{url}: {exc}") from None
    if not isinstance(found, dict):
        raise ConnectionError(f"{url}: not a JSON object")
    return found
