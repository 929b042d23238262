"""WhatsApp agents' step in `habakkuk setup`: the agent's key, checked with one short poll
of its updates before it is saved."""

from __future__ import annotations

from collections.abc import Mapping

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import SendError
from .metagraph import Conflict, GraphClient, GraphFatal
from .platforms import PlatformSetup, SetupCheckFailed, SetupField


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Poll the updates once without holding; returns what the poll found."""
    graph = GraphClient(secrets.get(config.token_env or "", ""), config.base_url or "", 30.0)
    try:
        found = await graph.get("updates", {"offset": "0", "timeout": "0"})
    except GraphFatal as exc:
        raise SetupCheckFailed(f"the agent platform refused the key: {exc}") from None
    except Conflict:
        raise SetupCheckFailed(
            "another program polls this agent's updates (stop it first: one poller a key)"
        ) from None
    except SendError as exc:
        raise SetupCheckFailed(f"cannot reach the agent platform at {graph.root}: {exc}") from None
    finally:
        await graph.close()
    waiting = len(found.get("updates") or [])
    return f"the agent's key works ({waiting} update(s) waiting)"


WHATSAPPAGENT_SETUP = PlatformSetup(
    type="whatsappagent",
    title="WhatsApp agent (Meta's agent platform)",
    instructions=(
        "1. Create an agent on Meta's WhatsApp agent platform and copy its key.\n"
        "2. Nothing to expose: Habakkuk long-polls the agent's updates (one poller per key;\n"
        "   stop any other program using the same key).\n"
        "3. A beta agent may message only the person who wrote to it last."
    ),
    fields=(
        SetupField("token_env", "Agent key", secret=True, variable="WHATSAPP_AGENT_KEY"),
        SetupField("allow_from", "Your own user id (the digits after user:)"),
    ),
    check=check_setup,
)
