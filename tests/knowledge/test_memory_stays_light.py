"""Without memory.embeddings, a long-lived process never loads numpy (about 14 MB)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import asyncio, sys
from pathlib import Path
from habakkuk.engine.config import parse_config
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime

async def main() -> None:
    home = Home(Path(sys.argv[1]))
    home.prepare()
    text = (
        'providers:\n  demo: {type: mock}\nagents:\n  main: {model: demo/tour}\n'
        'memory:\n  nightly: "00:00"\n'  # today's nightly pass is due at once
    )
    home.config_path.write_text(text)
    runtime = await Runtime.open(home, parse_config(text, home.config_path, home))
    folder = home.agent_dir("main") / "memory"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "old.md").write_text("---\ntitle: Old\nupdated: '2020-01-01T00:00:00Z'\n---\nx\n")
    runtime.start_workers(maintenance=True)
    session = await runtime.sessions.new_session(origin="tui", chat=True)
    await runtime.memory.search("main", "old")
    for _ in range(200):
        jobs = [j for j in await runtime.queue.upcoming(50) if j.kind.startswith("memory")]
        if not jobs:
            break
        await asyncio.sleep(0.05)
    await runtime.close()
    print("numpy" in sys.modules, "openai" in sys.modules)

asyncio.run(main())
"""


def test_a_runtime_with_workers_and_memory_does_not_import_numpy(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "home")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["False", "False"], done.stdout
