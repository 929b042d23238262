"""A process that asks a home's ChatGPT login for its token once and prints it (the
two-process refresh test runs two of these at once): python -m tests.llm.login_refresher
HOME AUTH_URL."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from habakkuk.engine.config import AuthConfig, ChatGPTAuthConfig
from habakkuk.engine.llm.logins.services import Logins


async def main(home: Path, url: str) -> None:
    logins = Logins(AuthConfig(chatgpt=ChatGPTAuthConfig(base_url=url)), home)
    print(await logins.login("chatgpt").token(), flush=True)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
