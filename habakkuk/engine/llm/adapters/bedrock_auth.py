"""Who a Bedrock request is from, and where it goes: a bearer API key or SigV4, a region.

A Bedrock API key (the provider's key, else `AWS_BEARER_TOKEN_BEDROCK`) is sent as
`Authorization: Bearer`. Otherwise the request is signed with SigV4 (service
`bedrock`) from the AWS standard credential chain, exactly as the AWS SDKs find it:
botocore's session (`get_credentials`: environment, shared credentials and config
files with profiles, SSO, web identity, container and instance metadata, credential
processes). Resolving the chain can read files and reach the network (SSO, STS,
instance metadata), so it runs on a worker thread, once; the credentials are kept,
and temporary ones are refreshed on a worker thread when botocore says they need it
(its advisory window: 15 minutes before they expire), never on the event loop.

The region: the provider's `region:`, else AWS_REGION, AWS_DEFAULT_REGION, the
host of a `base_url` on amazonaws.com, then the profile's `region` setting.

botocore is imported here only inside the functions that need it, so configuring
Bedrock costs nothing until the first call (or `warm`) and `habakkuk --help` never
loads it.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from ..provider import ProviderError
from . import KEYLESS

if TYPE_CHECKING:
    from botocore.credentials import Credentials, ReadOnlyCredentials
    from botocore.session import Session

BEARER_ENV = "AWS_BEARER_TOKEN_BEDROCK"
REGION_ENVS = ("AWS_REGION", "AWS_DEFAULT_REGION")
SERVICE = "bedrock"  # the SigV4 signing name of bedrock-runtime
_HOST_REGION = re.compile(r"bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com")
NO_CREDENTIALS = (
    "no AWS credentials found (the standard chain: AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws, SSO, instance or container roles), "
    f"and no Bedrock API key ({BEARER_ENV} or the provider's key_env)"
)


def endpoint(base_url: str | None, region: str) -> str:
    """The Bedrock runtime's root URL: `base_url`, else the region's public endpoint."""
    if base_url:
        return base_url.rstrip("/")
    return f"https://bedrock-runtime.{region}.amazonaws.com"


def stream_url(root: str, model: str) -> str:
    """The ConverseStream URL of `model` (the id, profile or ARN percent-encoded)."""
    return f"{root}/model/{quote(model, safe='')}/converse-stream"


def bearer_token(api_key: str | None) -> str | None:
    """The Bedrock API key to send, or None to sign with AWS credentials."""
    if api_key and api_key != KEYLESS:
        return api_key
    return os.environ.get(BEARER_ENV) or None


class BedrockAuth:
    """One provider's region and credentials, resolved once and kept."""

    def __init__(self, provider: str, region: str | None, base_url: str | None):
        self.provider = provider
        self.configured_region = region
        self.base_url = base_url
        self._lock = threading.Lock()
        self._session: Session | None = None
        self._region: str | None = None
        self._credentials: Credentials | None = None

    # -- blocking parts (worker threads) -----------------------------------------------------

    def _botocore_session(self) -> Session:
        if self._session is None:
            import botocore.session

            self._session = botocore.session.get_session()
        return self._session

    def resolve_region(self) -> str:
        """The region requests are signed for (blocking: may read the AWS config file)."""
        with self._lock:
            if self._region is None:
                self._region = self._find_region()
            return self._region

    def _find_region(self) -> str:
        if self.configured_region:
            return self.configured_region
        for variable in REGION_ENVS:
            value = os.environ.get(variable)
            if value:
                return value
        match = _HOST_REGION.search(urlsplit(self.base_url or "").netloc)
        if match:
            return match.group(1)
        found = self._botocore_session().get_config_variable("region")
        if found:
            return str(found)
        raise ProviderError(
            "bad_request",
            f"no AWS region: set providers.{self.provider}.region, or AWS_REGION",
            provider=self.provider,
        )

    def resolve_credentials(self) -> ReadOnlyCredentials:
        """Current AWS credentials from the chain (blocking: files, SSO, STS, metadata)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            with self._lock:
                if self._credentials is None:
                    self._credentials = self._botocore_session().get_credentials()
                credentials = self._credentials
            if credentials is None:
                raise ProviderError("auth", NO_CREDENTIALS, provider=self.provider)
            return credentials.get_frozen_credentials()
        except (BotoCoreError, ClientError) as exc:
            raise self._chain_error(exc) from exc

    def _chain_error(self, exc: Exception) -> ProviderError:
        from botocore.exceptions import ConnectionError as BotoConnectionError

        text = f"the AWS credential chain failed: {exc}"
        if isinstance(exc, BotoConnectionError):
            return ProviderError("network", text, provider=self.provider)
        return ProviderError("auth", text, provider=self.provider)

    def warm(self, api_key: str | None) -> None:
        """Import botocore and resolve the region and credentials now (blocking)."""
        import botocore.auth
        import botocore.awsrequest
        import botocore.eventstream  # noqa: F401  # the stream's decoder, imported ahead

        self.resolve_region()
        if bearer_token(api_key) is None:
            self.resolve_credentials()

    # -- per request ---------------------------------------------------------------------

    def _needs_thread(self) -> bool:
        """Whether getting credentials may block: not resolved yet, or due for refresh."""
        credentials = self._credentials
        if credentials is None or self._region is None:
            return True
        refresh_needed = getattr(credentials, "refresh_needed", None)
        return bool(refresh_needed()) if refresh_needed is not None else False

    async def headers(self, url: str, body: bytes, api_key: str | None) -> dict[str, str]:
        """The request's headers, authorization included."""
        base = {"Content-Type": "application/json", "Accept": "application/vnd.amazon.eventstream"}
        token = bearer_token(api_key)
        if token is not None:
            return {**base, "Authorization": f"Bearer {token}"}
        if self._needs_thread():
            frozen, region = await asyncio.to_thread(self._credentials_and_region)
        else:
            frozen, region = self._credentials_and_region()
        return sign(url, body, base, frozen, region)

    def _credentials_and_region(self) -> tuple[ReadOnlyCredentials, str]:
        return self.resolve_credentials(), self.resolve_region()

    async def region(self) -> str:
        """The region (resolved on a worker thread the first time)."""
        if self._region is not None:
            return self._region
        return await asyncio.to_thread(self.resolve_region)


def sign(
    url: str, body: bytes, headers: dict[str, str], credentials: Any, region: str
) -> dict[str, str]:
    """`headers` with SigV4's X-Amz-Date, Authorization (and the session token) added."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
    SigV4Auth(credentials, SERVICE, region).add_auth(request)
    return dict(request.headers.items())


def check(api_key: str | None, region: str | None, base_url: str | None) -> str:
    """Why calls would fail to authenticate ("" when a key or credentials and a region
    are found). Blocking; used by `habakkuk setup`, which makes no Bedrock request."""
    auth = BedrockAuth("bedrock", region, base_url)
    try:
        auth.resolve_region()
        if bearer_token(api_key) is None:
            auth.resolve_credentials()
    except ProviderError as exc:
        return str(exc.args[0])
    return ""
