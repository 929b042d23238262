"""browser_snapshot of a 5,000-node page in a real headless Chromium (issue 36).

Target: at most 500 ms of our own time per snapshot. Printed as medians over the rounds:
the call's wall time, the part spent waiting for Chromium's answers (getFullAXTree, the
frame tree, the title: the browser's work), the rest ("ours", wall), and the CPU time
this process used during the call ("ours, CPU": reading the answers' JSON and rendering),
and the render of the tree alone (CPU). On a shared machine the wall figures include
waiting for a core; the CPU figures are the steadier ones, and the verdict uses them.

The page (served from 127.0.0.1) holds 5,000 elements: sections with headings,
paragraphs, links, buttons, inputs, list items and table cells.

Run: python benchmarks/browser_snapshot.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NODES = 5_000
TARGET_MS = 500.0


def page() -> str:
    """A page of NODES elements (counted as the tags written)."""
    parts: list[str] = ["<title>Big page</title><main>"]
    count = 1
    section = 0
    while count < NODES:
        section += 1
        parts.append(f"<section><h2>Section {section}</h2><p>Text of section {section}.</p><ul>")
        for i in range(5):
            parts.append(f"<li><a href='/s{section}/{i}'>Link {section}.{i}</a></li>")
        parts.append(
            f"</ul><button>Act {section}</button><input aria-label='Field {section}'>"
            f"<table><tr><td>Cell {section}a</td><td>Cell {section}b</td></tr></table></section>"
        )
        count += 19  # section h2 p ul 5li 5a button input table tbody tr 2td
    parts.append("</main>")
    return "".join(parts)


async def measure(rounds: int) -> dict[str, list[float]]:
    from aiohttp import web

    from habakkuk.engine.browser_config import BrowserConfig
    from habakkuk.tools.browser import actions
    from habakkuk.tools.browser.fleet import BrowserFleet
    from habakkuk.tools.browser.snapshot import render
    from habakkuk.tools.browser.tools import browser_tools
    from tests.helpers import tool_context

    body = page()

    async def serve(request: web.Request) -> web.Response:
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", serve)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    figures: dict[str, list[float]] = {
        "wall": [],
        "chromium": [],
        "ours": [],
        "ours, CPU": [],
        "render": [],
    }
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        settings = BrowserConfig(allow_private=["127.0.0.1"])
        fleet = BrowserFleet(root, lambda agent: settings)
        tools = {tool.name: tool for tool in browser_tools(fleet)}
        ctx = tool_context(root)
        try:
            await tools["browser_navigate"].run({"url": f"http://127.0.0.1:{port}/"}, ctx)
            browser = fleet.running("main")
            assert browser is not None
            waited = [0.0]
            send = browser.conn.send

            async def timed(*args: Any, **kwargs: Any) -> dict[str, Any]:
                began = time.perf_counter()
                try:
                    return await send(*args, **kwargs)
                finally:
                    waited[0] += time.perf_counter() - began

            browser.conn.send = timed  # type: ignore[method-assign]  # count Chromium's time
            tab = await browser.current_tab()
            tree = await send("Accessibility.getFullAXTree", session=tab.session)
            nodes = tree["nodes"]
            elements = await send(
                "Runtime.evaluate",
                {"expression": "document.getElementsByTagName('*').length", "returnByValue": True},
                tab.session,
            )
            count = elements["result"]["value"]
            print(f"page: {count:,} elements, {len(nodes):,} accessibility nodes")
            for _ in range(rounds):
                waited[0] = 0.0
                began, cpu = time.perf_counter(), time.process_time()
                out = await tools["browser_snapshot"].run({}, ctx)
                wall = time.perf_counter() - began
                figures["ours, CPU"].append((time.process_time() - cpu) * 1000)
                figures["wall"].append(wall * 1000)
                figures["chromium"].append(waited[0] * 1000)
                figures["ours"].append((wall - waited[0]) * 1000)
                began = time.process_time()
                render(nodes, ref_of=lambda b: browser.refs.ref(tab.target, b), url=tab.url)
                figures["render"].append((time.process_time() - began) * 1000)
            print(f"snapshot: {len(out.text):,} characters shown (cut at 24,000)")
            full = await actions.snapshot_text(browser, tab)
            print(f"whole rendering: {len(full):,} characters, {full.count(chr(10)) + 1:,} lines")
        finally:
            await fleet.close()
            await runner.cleanup()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    figures = asyncio.run(measure(args.rounds))
    for name in figures:
        values = figures[name]
        print(
            f"{name:>10}: median {statistics.median(values):7.1f} ms, "
            f"max {max(values):7.1f} ms over {len(values)} rounds"
        )
    ours = statistics.median(figures["ours, CPU"])
    verdict = "ok" if ours <= TARGET_MS else "OVER"
    print(f"our own time: {ours:.1f} ms (target <= {TARGET_MS:.0f} ms): {verdict}")
    return 0 if ours <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
