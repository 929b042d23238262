"""Signal's step in `habakkuk setup`: what to run on the signal-cli side, and a check
that the daemon answers and serves the account before anything is saved."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import FatalAdapterError, SendError
from .platforms import PlatformSetup, SetupCheckFailed, SetupField
from .signal_rpc import DEFAULT_BASE_URL, SignalRpc
from .signal_wire import METHOD_NOT_FOUND, mapped_error, parse_error


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Ask the daemon whether it serves the account: "+49... on signal-cli 0.13", or
    SetupCheckFailed naming what is wrong."""
    rpc = SignalRpc(config.base_url or DEFAULT_BASE_URL, config.account or "")
    base = rpc.base_url
    try:
        try:
            async with rpc.session().get(
                f"{base}/api/v1/check", timeout=aiohttp.ClientTimeout(total=15)
            ) as response:
                if response.status != 200:
                    raise SetupCheckFailed(
                        f"{base} is not a signal-cli HTTP daemon (/api/v1/check: HTTP "
                        f"{response.status})"
                    )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SetupCheckFailed(
                f"cannot reach {base}: {type(exc).__name__}: {exc} "
                "(start it: signal-cli daemon --http 127.0.0.1:8080 --receive-mode on-connection)"
            ) from None
        try:
            found = await _accounts(rpc)
            if found is not None and rpc.number not in found:
                has = ", ".join(found) or "none"
                raise SetupCheckFailed(
                    f"the daemon at {base} has no account {rpc.number} (it has: {has}); "
                    f"register or link it: signal-cli -a {rpc.number} register"
                )
            version = await rpc.call("version", {}, timeout=15)
        except (SendError, FatalAdapterError) as exc:
            raise SetupCheckFailed(f"signal-cli at {base}: {exc}") from None
    finally:
        await rpc.close()
    release = version.get("version", "?") if isinstance(version, dict) else "?"
    if found is None:  # a single-account daemon (signal-cli -a NUMBER daemon)
        return f"{rpc.number} on signal-cli {release} (single-account daemon)"
    return f"{rpc.number} on signal-cli {release}"


async def _accounts(rpc: SignalRpc) -> list[str] | None:
    """The numbers a multi-account daemon serves; None from a single-account one (it has
    no listAccounts)."""
    body = await rpc.request("listAccounts", {}, timeout=15)
    error = body.get("error")
    if isinstance(error, dict) and error.get("code") == METHOD_NOT_FOUND:
        return None
    if error is not None:
        raise mapped_error("listAccounts", parse_error(error), rpc.number)
    result = body.get("result")
    items = result if isinstance(result, list) else []
    return [str(a.get("number", "")) for a in items if isinstance(a, dict)]


SETUP = PlatformSetup(
    type="signal",
    title="Signal",
    instructions=(
        "1. Install signal-cli (github.com/AsamK/signal-cli) and give the bot a number:\n"
        "   signal-cli -a +49... register, then signal-cli -a +49... verify CODE\n"
        "   (or link it to your phone: signal-cli link -n habakkuk, scan the QR code).\n"
        "2. Run its HTTP daemon on this machine (it has no password: keep it on loopback):\n"
        "   signal-cli daemon --http 127.0.0.1:8080 --receive-mode on-connection\n"
        "   (on-connection: messages wait on Signal's server while Habakkuk is down).\n"
        "3. Enter the daemon's address and the bot's number below."
    ),
    fields=(
        SetupField("base_url", "The daemon's address", default=DEFAULT_BASE_URL),
        SetupField("account", "The bot's phone number (+49...)"),
        SetupField(
            "allow_from",
            "Your Signal phone number or UUID (others pair with a code)",
        ),
    ),
    check=check_setup,
)
