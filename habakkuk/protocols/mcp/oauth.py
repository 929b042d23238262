"""OAuth for `auth: oauth` MCP servers: `habakkuk mcp login/logout` and the token handler.

Login follows the MCP authorization flow: a token-less initialize whose 401
names the protected resource metadata (RFC 9728) and scope; the authorization
server's metadata (RFC 8414 / OpenID discovery, URLs from the SDK's helpers;
with no resource metadata the server's origin is the authorization server, as
in MCP 2025-03-26); dynamic client registration (RFC 7591, a public native
client) unless the entry sets client_id; then the authorization code flow with
PKCE S256, state and the iss check (RFC 9207) through a listener on 127.0.0.1,
or the device flow (RFC 8628) without a browser. The server's URL goes as the
resource indicator (RFC 8707) in every request.

The client, tokens, token endpoint and resource live in HOME/auth.json under
`mcp:<server>` (0600, replaced atomically); refreshes hold auth.json.lock so
several processes share one login. `OAuthHandler` is the transport's httpx2
auth: it hands out the stored token and, on a 401, refreshes once; a second
refusal within a minute, a refused refresh token or no login at all is an
error naming `habakkuk mcp login NAME`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import secrets
import sys
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from habakkuk.engine.auth_store import AUTH_FILE, LoginStore
from habakkuk.engine.config import McpServerConfig, load_config
from habakkuk.engine.errors import ConfigError, HabakkukError
from habakkuk.engine.home import Environment, Home
from habakkuk.engine.timeouts import wait_within

from .transport import TransportError

LOGIN_TIMEOUT = 300.0
REFRESH_MARGIN = 60.0  # refresh this long before the token expires
REFUSAL_WINDOW = 60.0
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
CALLBACK_PATH = "/callback"


class LoginRequired(TransportError):
    """The server needs a (new) sign-in; the message names the command."""


class OAuthError(HabakkukError):
    """The sign-in failed; the message says where."""


def auth_key(server: str) -> str:
    return f"mcp:{server}"


# -- discovery ---------------------------------------------------------------------------


@dataclass
class Discovery:
    """What login learns before it asks the user anything."""

    resource: str
    issuer: str | None
    metadata: dict[str, Any]
    challenge_scope: str | None
    resource_metadata: Any  # mcp.shared.auth.ProtectedResourceMetadata | None
    asm: Any  # mcp.shared.auth.OAuthMetadata | None

    @property
    def token_endpoint(self) -> str:
        return str(self.metadata["token_endpoint"])


def _http(**kwargs: Any) -> Any:
    import httpx2

    return httpx2.AsyncClient(timeout=30.0, follow_redirects=False, **kwargs)


async def discover(url: str) -> Discovery:
    """Resource and authorization server metadata for the MCP server at `url`."""
    from mcp.client.auth.utils import (
        build_oauth_authorization_server_metadata_discovery_urls,
        build_protected_resource_metadata_discovery_urls,
        extract_resource_metadata_from_www_auth,
        extract_scope_from_www_auth,
    )
    from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
    from mcp_types import LATEST_PROTOCOL_VERSION

    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "habakkuk", "version": "login"},
        },
    }
    async with _http() as client:
        try:
            first = await client.post(
                url,
                json=initialize,
                headers={"Accept": "application/json, text/event-stream"},
            )
        except Exception as exc:
            raise OAuthError(f"cannot reach {url}: {exc}") from None
        header_url = extract_resource_metadata_from_www_auth(first)
        challenge_scope = extract_scope_from_www_auth(first) if first.status_code == 401 else None
        prm = None
        for candidate in build_protected_resource_metadata_discovery_urls(header_url, url):
            response = await client.get(candidate)
            if response.status_code == 200:
                with contextlib.suppress(ValueError):
                    prm = ProtectedResourceMetadata.model_validate_json(response.content)
                    break
        auth_server = str(prm.authorization_servers[0]) if prm is not None else None
        if (
            prm is not None
            and auth_server
            and auth_server.endswith("/")
            and (urllib.parse.urlparse(auth_server).path == "/")
        ):
            auth_server = auth_server.rstrip("/")
        metadata: dict[str, Any] | None = None
        asm = None
        for candidate in build_oauth_authorization_server_metadata_discovery_urls(auth_server, url):
            response = await client.get(candidate)
            if response.status_code == 200:
                try:
                    raw = response.json()
                    asm = OAuthMetadata.model_validate(raw)
                except ValueError:
                    continue
                metadata = dict(raw)
                break
            if response.status_code >= 500:
                break
    if metadata is None:
        if prm is not None:
            raise OAuthError(f"no authorization server metadata found for {auth_server}")
        # MCP 2025-03-26: the server's origin is the authorization server, default paths
        parsed = urllib.parse.urlparse(url)
        origin = f"{parsed.scheme}://{parsed.netloc}"
        metadata = {
            "authorization_endpoint": f"{origin}/authorize",
            "token_endpoint": f"{origin}/token",
            "registration_endpoint": f"{origin}/register",
        }
    resource = str(prm.resource) if prm is not None and prm.resource else url
    issuer = str(metadata["issuer"]) if metadata.get("issuer") else None
    return Discovery(resource, issuer, metadata, challenge_scope, prm, asm)


def choose_scope(server: McpServerConfig, found: Discovery, grant_types: list[str]) -> str | None:
    """scopes, else the challenge's, else the metadata's; plus offline_access when offered."""
    from mcp.client.auth.utils import get_client_metadata_scopes

    if server.scopes:
        scope = " ".join(server.scopes)
        offered = (found.asm.scopes_supported if found.asm is not None else None) or []
        if "offline_access" in offered and "offline_access" not in server.scopes:
            scope += " offline_access"
        return scope
    return get_client_metadata_scopes(
        found.challenge_scope, found.resource_metadata, found.asm, grant_types
    )


# -- the client ----------------------------------------------------------------------------


async def register(
    server: McpServerConfig, env: Environment, found: Discovery, redirect: str, scope: str | None
) -> dict[str, Any]:
    """The configured client, or a freshly registered public native one."""
    if server.client_id:
        secret = env.get(server.client_secret_env) if server.client_secret_env else None
        if server.client_secret_env and secret is None:
            raise OAuthError(f"variable {server.client_secret_env} (client secret) is not set")
        return {
            "client_id": server.client_id,
            "client_secret": secret,
            "token_endpoint_auth_method": "client_secret_post" if secret else "none",
        }
    endpoint = found.metadata.get("registration_endpoint")
    if not endpoint:
        raise OAuthError(
            f"the authorization server offers no client registration; set client_id"
            f" for mcp_servers.{server.name}"
        )
    body: dict[str, Any] = {
        "client_name": "Habakkuk",
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token", DEVICE_GRANT],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
    }
    if scope:
        body["scope"] = scope
    async with _http() as client:
        response = await client.post(str(endpoint), json=body)
    if response.status_code not in (200, 201):
        raise OAuthError(f"client registration failed: HTTP {response.status_code} {response.text}")
    data = response.json()
    if not data.get("client_id"):
        raise OAuthError("client registration answered without a client_id")
    return {
        "client_id": data["client_id"],
        "client_secret": data.get("client_secret"),
        "token_endpoint_auth_method": data.get("token_endpoint_auth_method") or "none",
    }


def _client_auth(client: dict[str, Any], form: dict[str, str]) -> dict[str, str]:
    """Put the client's credentials where its auth method wants them; returns headers."""
    form["client_id"] = str(client["client_id"])
    secret = client.get("client_secret")
    if not secret:
        return {}
    if client.get("token_endpoint_auth_method") == "client_secret_basic":
        del form["client_id"]
        pair = f"{urllib.parse.quote(client['client_id'])}:{urllib.parse.quote(secret)}"
        return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}
    form["client_secret"] = str(secret)
    return {}


async def token_request(
    endpoint: str, client: dict[str, Any], form: dict[str, str]
) -> tuple[int, dict[str, Any]]:
    """POST to the token endpoint; (status, JSON body)."""
    headers = _client_auth(client, form)
    async with _http() as http:
        response = await http.post(endpoint, data=form, headers=headers)
    try:
        body = response.json()
    except ValueError:
        body = {"error": f"HTTP {response.status_code}", "error_description": response.text[:200]}
    return response.status_code, body if isinstance(body, dict) else {}


def tokens_from(body: dict[str, Any], previous: dict[str, Any] | None = None) -> dict[str, Any]:
    if not body.get("access_token"):
        raise OAuthError(f"the token endpoint answered without an access token: {body}")
    expires_in = body.get("expires_in")
    refresh = body.get("refresh_token") or (previous or {}).get("refresh_token")
    return {
        "access_token": body["access_token"],
        "refresh_token": refresh,
        "expires_at": time.time() + float(expires_in) if expires_in else None,
        "scope": body.get("scope") or (previous or {}).get("scope"),
    }


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(64)[:96]
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def browser_available() -> bool:
    """Whether a browser can be opened here (not over SSH, not headless Linux)."""
    if os.environ.get("SSH_CONNECTION") or os.environ.get("SSH_TTY"):
        return False
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        return False
    import webbrowser

    try:
        webbrowser.get()
    except webbrowser.Error:
        return False
    return True


async def _code_flow(
    server: McpServerConfig,
    env: Environment,
    found: Discovery,
    open_url: Callable[[str], Any] | None,
    out: TextIO,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The authorization code flow with PKCE through a loopback listener."""
    from aiohttp import web

    result: asyncio.Future[dict[str, str]] = asyncio.get_running_loop().create_future()

    async def callback(request: web.Request) -> web.Response:
        if not result.done():
            result.set_result(dict(request.query))
        return web.Response(
            text="Habakkuk: signed in. You can close this tab.", content_type="text/plain"
        )

    app = web.Application()
    app.router.add_get(CALLBACK_PATH, callback)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", server.callback_port or 0)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise OAuthError(f"cannot listen on 127.0.0.1:{server.callback_port}: {exc}") from None
    try:
        port = int(runner.addresses[0][1])
        redirect = f"http://127.0.0.1:{port}{CALLBACK_PATH}"
        grant_types = ["authorization_code", "refresh_token"]
        scope = choose_scope(server, found, grant_types)
        client = await register(server, env, found, redirect, scope)
        verifier, challenge = _pkce()
        state = secrets.token_urlsafe(24)
        query = {
            "response_type": "code",
            "client_id": client["client_id"],
            "redirect_uri": redirect,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": state,
            "resource": found.resource,
        }
        if scope:
            query["scope"] = scope
        endpoint = str(found.metadata["authorization_endpoint"])
        sep = "&" if "?" in endpoint else "?"
        url = f"{endpoint}{sep}{urllib.parse.urlencode(query)}"
        print(f"Sign in to {server.name} here:\n  {url}", file=out, flush=True)
        # open_url may be a coroutine function (tests play the browser with one)
        opened = open_url(url) if open_url is not None else None
        browser = asyncio.ensure_future(opened) if asyncio.iscoroutine(opened) else None
        try:
            params = await wait_within(result, LOGIN_TIMEOUT)
        except TimeoutError:
            raise OAuthError(f"no sign-in within {LOGIN_TIMEOUT:.0f}s") from None
        finally:
            if browser is not None:
                await _settle_browser(browser)
    finally:
        await runner.cleanup()
    if params.get("error"):
        why = params.get("error_description") or params["error"]
        raise OAuthError(f"the authorization server refused: {why}")
    if not secrets.compare_digest(params.get("state", ""), state):
        raise OAuthError("the sign-in answer carried the wrong state; try again")
    _check_iss(params.get("iss"), found)
    code = params.get("code")
    if not code:
        raise OAuthError("the sign-in answer carried no code")
    status, body = await token_request(
        found.token_endpoint,
        client,
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect,
            "code_verifier": verifier,
            "resource": found.resource,
        },
    )
    if status != 200:
        raise OAuthError(f"the code exchange failed: {error_text(body)}")
    return client, tokens_from(body)


def _check_iss(iss: str | None, found: Discovery) -> None:
    from mcp.client.auth.exceptions import OAuthFlowError
    from mcp.client.auth.utils import validate_authorization_response_iss

    try:
        validate_authorization_response_iss(iss, found.asm)
    except OAuthFlowError as exc:
        raise OAuthError(f"sign-in rejected: {exc}") from None


def error_text(body: dict[str, Any]) -> str:
    error = str(body.get("error", "unknown error"))
    description = body.get("error_description")
    return f"{error}: {description}" if description else error


async def _device_flow(
    server: McpServerConfig, env: Environment, found: Discovery, out: TextIO
) -> tuple[dict[str, Any], dict[str, Any]]:
    """RFC 8628: show a code to enter elsewhere, poll until the user approves."""
    endpoint = found.metadata.get("device_authorization_endpoint")
    if not endpoint:
        raise OAuthError(
            "no browser here and the authorization server offers no device flow: sign in"
            f" on a machine with a browser (habakkuk mcp login {server.name}) and copy"
            f" {AUTH_FILE} into this home"
        )
    grant_types = ["refresh_token", DEVICE_GRANT]
    scope = choose_scope(server, found, grant_types)
    client = await register(server, env, found, f"http://127.0.0.1{CALLBACK_PATH}", scope)
    form = {"resource": found.resource}
    if scope:
        form["scope"] = scope
    headers = _client_auth(client, form)
    async with _http() as http:
        response = await http.post(str(endpoint), data=form, headers=headers)
    if response.status_code != 200:
        raise OAuthError(f"the device authorization failed: HTTP {response.status_code}")
    grant = response.json()
    where = grant.get("verification_uri_complete") or grant.get("verification_uri")
    print(f"On any device, open {where}\nand enter the code {grant.get('user_code')}", file=out)
    interval = float(grant.get("interval", 5))
    deadline = time.monotonic() + float(grant.get("expires_in", LOGIN_TIMEOUT))
    while time.monotonic() < deadline:
        status, body = await token_request(
            found.token_endpoint,
            client,
            {
                "grant_type": DEVICE_GRANT,
                "device_code": str(grant["device_code"]),
                "resource": found.resource,
            },
        )
        if status == 200:
            return client, tokens_from(body)
        error = body.get("error")
        if error == "authorization_pending":
            await asyncio.sleep(interval)
        elif error == "slow_down":
            interval += 5
            await asyncio.sleep(interval)
        else:
            raise OAuthError(f"the device sign-in failed: {error_text(body)}")
    raise OAuthError("the device code expired before the sign-in finished")


async def login(
    home: Home,
    server: McpServerConfig,
    env: Environment,
    *,
    device: bool = False,
    open_url: Callable[[str], Any] | None = None,
    out: TextIO = sys.stdout,
) -> dict[str, Any]:
    """Sign in to `server` and store the login in auth.json; returns the stored record."""
    if server.url is None or server.auth != "oauth":
        raise OAuthError(f"mcp_servers.{server.name} is not an `auth: oauth` url server")
    found = await discover(server.url)
    if device:
        client, tokens = await _device_flow(server, env, found, out)
    else:
        client, tokens = await _code_flow(server, env, found, open_url, out)
    record = {
        "client_id": client["client_id"],
        "client_secret": client.get("client_secret"),
        "token_endpoint_auth_method": client.get("token_endpoint_auth_method"),
        "token_endpoint": found.token_endpoint,
        "resource": found.resource,
        "issuer": found.issuer,
        "server_url": server.url,
        **tokens,
    }
    store = LoginStore(home.root)
    await asyncio.to_thread(_locked_put, store, auth_key(server.name), record)
    return record


def _locked_put(store: LoginStore, key: str, record: dict[str, Any]) -> None:
    with store.held():
        store.put(key, record)


def expired(record: dict[str, Any]) -> bool:
    """Whether the stored token is past (or within REFRESH_MARGIN of) its expiry."""
    expires_at = record.get("expires_at")
    if not expires_at:
        return False
    return time.time() > float(expires_at) - REFRESH_MARGIN


# -- commands -----------------------------------------------------------------------------


def _server(home: Home, name: str) -> tuple[McpServerConfig, Environment]:
    """The `auth: oauth` server `name` and the variables its settings read."""
    config = load_config(home)
    server = config.mcp_servers.get(name)
    if server is None:
        known = ", ".join(sorted(config.mcp_servers)) or "none"
        raise ConfigError(f"mcp_servers.{name} is not configured (mcp_servers: {known})")
    if server.auth != "oauth":
        raise ConfigError(f"mcp_servers.{name} does not use `auth: oauth`; nothing to sign in to")
    from habakkuk.engine.secrets import home_environment

    return server, home_environment(home, config)


async def login_command(home: Home, name: str, device: bool, no_browser: bool) -> int:
    """`habakkuk mcp login NAME [--device] [--no-browser]`."""
    import webbrowser

    server, env = _server(home, name)
    use_device = device or (not no_browser and not browser_available())
    open_url = None if no_browser else webbrowser.open
    if use_device and not device:
        print("no browser here: trying the device flow", file=sys.stderr)
    try:
        record = await login(home, server, env, device=use_device, open_url=open_url)
    except OAuthError as exc:
        raise OAuthError(f"mcp login {name}: {exc}") from None
    scope = f" (scope: {record['scope']})" if record.get("scope") else ""
    print(f"signed in to {name}{scope}; the login is in {home.root / AUTH_FILE}")
    return 0


def logout_command(home: Home, name: str) -> int:
    """`habakkuk mcp logout NAME`: forget the login (the entry stays in config.yaml)."""
    store = LoginStore(home.root)
    with store.held():
        removed = store.remove(auth_key(name))
    print(f"signed out of {name}" if removed else f"no login for {name}")
    return 0


def login_state(home: Home, name: str) -> str | None:
    """A one-line problem with the stored login of `name`, or None when it looks usable."""
    record = LoginStore(home.root).get(auth_key(name))
    if record is None:
        return f"not signed in; run `habakkuk mcp login {name}`"
    if expired(record) and not record.get("refresh_token"):
        return f"the login has expired; run `habakkuk mcp login {name}`"
    return None


async def _settle_browser(browser: asyncio.Future[Any]) -> None:
    """Give the browser opener up to 10 s to finish; its own errors do not matter here,
    but a cancellation of this task (Ctrl+C) still stops the login."""
    try:
        await wait_within(asyncio.shield(browser), 10)
    except asyncio.CancelledError:
        browser.cancel()
        raise
    except Exception:  # it failed, or is still at it after 10 s (TimeoutError)
        browser.cancel()


__all__ = [
    "LoginRequired",
    "OAuthError",
    "login",
    "login_command",
    "login_state",
    "logout_command",
]
