"""ChatGPT: OpenAI's device-code sign-in and refresh-token grant, as the Codex CLI does it.

Sign-in: POST {issuer}/api/accounts/deviceauth/usercode with the client id gives a
device_auth_id and a user code, which the person enters at {issuer}/codex/device;
POST .../deviceauth/token is polled (403/404 while pending) until it answers with an
authorization code and the PKCE verifier, which POST {issuer}/oauth/token exchanges
(grant_type=authorization_code, redirect_uri {issuer}/deviceauth/callback) for the
id, access and refresh tokens. The refresh is the same endpoint with
grant_type=refresh_token. The ChatGPT account id (the `chatgpt-account-id` header of
every call) is the id token's https://api.openai.com/auth claim.
"""

from __future__ import annotations

from typing import Any

from .common import Described, DeviceCode, Session, Sleep, now, number
from .wire import LoginRefused, LoginUnreachable, call, jwt_claims

CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"  # the Codex CLI's public client
ISSUER = "https://auth.openai.com"
SCOPE = "openid profile email offline_access"
AUTH_CLAIM = "https://api.openai.com/auth"
SIGN_IN_WAIT = 15 * 60.0  # the Codex CLI gives up after fifteen minutes
DEFAULT_LIFETIME = 3600.0  # when neither expires_in nor the token's exp says


class ChatGPT:
    """The `chatgpt` login."""

    kind = "chatgpt"

    def __init__(self, base_url: str = ISSUER, client_id: str = CLIENT_ID):
        self.issuer = base_url.rstrip("/")
        self.client_id = client_id

    async def start(self) -> DeviceCode:
        """Ask for a user code."""
        url = f"{self.issuer}/api/accounts/deviceauth/usercode"
        reply = await call("POST", url, json_body={"client_id": self.client_id})
        if reply.status == 404:
            raise LoginRefused.said("auth.device_not_enabled", url=url)
        device_id = reply.field("device_auth_id")
        user_code = reply.field("user_code") or reply.field("usercode")
        if not reply.ok or not device_id or not user_code:
            raise LoginRefused.said("auth.bad_answer", url=url, status=reply.status)
        return DeviceCode(
            user_code=user_code,
            url=f"{self.issuer}/codex/device",
            poll_id=device_id,
            interval=max(0.0, number(reply.data.get("interval"), 5.0)),
            deadline=now() + SIGN_IN_WAIT,
        )

    async def finish(self, code: DeviceCode, sleep: Sleep) -> dict[str, Any]:
        """Poll until the person approved, then exchange the authorization code."""
        url = f"{self.issuer}/api/accounts/deviceauth/token"
        body = {"device_auth_id": code.poll_id, "user_code": code.user_code}
        while True:
            reply = await call("POST", url, json_body=body)
            if reply.ok:
                break
            if reply.status not in (403, 404):
                raise LoginRefused.said("auth.bad_answer", url=url, status=reply.status)
            if now() >= code.deadline:
                raise LoginRefused.said("auth.sign_in_expired", kind=self.kind)
            await sleep(min(code.interval, max(0.0, code.deadline - now())))
        authorization = reply.field("authorization_code")
        verifier = reply.field("code_verifier")
        if not authorization or not verifier:
            raise LoginRefused.said("auth.bad_answer", url=url, status=reply.status)
        tokens = await call(
            "POST",
            f"{self.issuer}/oauth/token",
            form={
                "grant_type": "authorization_code",
                "code": authorization,
                "redirect_uri": f"{self.issuer}/deviceauth/callback",
                "client_id": self.client_id,
                "code_verifier": verifier,
            },
        )
        if not tokens.ok or not tokens.field("access_token"):
            raise LoginRefused.said(
                "auth.bad_answer", url=f"{self.issuer}/oauth/token", status=tokens.status
            )
        record = self._record(tokens.data, {})
        record["signed_in_at"] = now()
        return record

    async def refresh(self, record: dict[str, Any]) -> dict[str, Any]:
        """The refresh-token grant; a refusal (400/401) means signing in again."""
        refresh_token = record.get("refresh_token")
        if not isinstance(refresh_token, str) or not refresh_token:
            raise LoginRefused.said("auth.login_again", kind=self.kind)
        url = f"{self.issuer}/oauth/token"
        reply = await call(
            "POST",
            url,
            json_body={
                "client_id": self.client_id,
                "grant_type": "refresh_token",
                "refresh_token": refresh_token,
                "scope": "openid profile email",
            },
        )
        if reply.status in (400, 401, 403):
            raise LoginRefused.said("auth.login_again", kind=self.kind)
        if not reply.ok or not reply.field("access_token"):
            # A 5xx or a garbled answer: the service, not the login; worth a retry.
            raise LoginUnreachable.said("auth.bad_answer", url=url, status=reply.status)
        return self._record(reply.data, record)

    def _record(self, tokens: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
        """The stored login from a token answer (what it lacks kept from `previous`)."""
        record = dict(previous)
        for name in ("access_token", "refresh_token", "id_token"):
            value = tokens.get(name)
            if isinstance(value, str) and value:
                record[name] = value
        claims = jwt_claims(str(record.get("id_token", "")))
        auth = claims.get(AUTH_CLAIM)
        if isinstance(auth, dict):
            if isinstance(auth.get("chatgpt_account_id"), str):
                record["account_id"] = auth["chatgpt_account_id"]
            if isinstance(auth.get("chatgpt_plan_type"), str):
                record["plan"] = auth["chatgpt_plan_type"]
        if isinstance(claims.get("email"), str):
            record["email"] = claims["email"]
        lifetime = number(tokens.get("expires_in"), 0.0)
        if lifetime > 0:
            record["expires_at"] = now() + lifetime
        else:
            exp = number(jwt_claims(str(record.get("access_token", ""))).get("exp"), 0.0)
            record["expires_at"] = exp if exp > 0 else now() + DEFAULT_LIFETIME
        record["refreshed_at"] = now()
        return record

    def expires_at(self, record: dict[str, Any]) -> float:
        """When the access token expires."""
        if not record.get("access_token"):
            return 0.0
        return number(record.get("expires_at"), 0.0)

    def session(self, record: dict[str, Any]) -> Session:
        """The access token as bearer, the account id as header."""
        headers = {}
        account = record.get("account_id")
        if isinstance(account, str) and account:
            headers["chatgpt-account-id"] = account
        return Session(str(record.get("access_token", "")), None, headers)

    def describe(self, record: dict[str, Any]) -> Described:
        """The e-mail (else the account id) and plan."""
        who = str(record.get("email") or record.get("account_id") or "")
        plan = str(record.get("plan") or "")
        return Described(who, self.expires_at(record), plan)
