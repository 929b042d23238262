"""`habakkuk computer view`: the agent's Xvfb captured with its cookie and drawn in the
terminal with half blocks, saved as a PNG, or piped; and why there is nothing to show."""

from __future__ import annotations

import asyncio
import io
import os
import sys
from pathlib import Path

from PIL import Image

from habakkuk.engine.computer_config import ComputerConfig
from habakkuk.engine.home import Home
from habakkuk.tools.computer.view import UPPER_HALF, half_blocks
from tests.conftest import mock_config
from tests.helpers import tool_context

from .xdesk import bench, needs_x


async def habakkuk(home: Home, *args: str) -> tuple[int, bytes, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "habakkuk.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HABAKKUK_HOME": str(home.root), "PYTHONPATH": os.getcwd()},
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out, err.decode()


@needs_x
async def test_the_agents_desktop_is_saved_or_piped_as_a_png(home: Home, tmp_path: Path) -> None:
    home.config_path.write_text(mock_config(), encoding="utf-8")
    async with bench(tool_context(home.root), ComputerConfig(size="1024x768")) as b:
        await b.call("computer_open", app="xeyes", screenshot=False)
        saved = tmp_path / "screen.png"
        code, out, err = await habakkuk(home, "computer", "view", "--save", str(saved))
        assert code == 0, err
        assert f"to {saved}" in out.decode()
        with Image.open(saved) as image:
            assert image.size == (1024, 768)
        code, out, err = await habakkuk(home, "computer", "view", "main")  # a pipe: the PNG
        assert code == 0, err
        with Image.open(io.BytesIO(out)) as image:
            assert image.format == "PNG" and image.size == (1024, 768)


async def test_without_a_running_desktop_it_says_so(home: Home) -> None:
    home.config_path.write_text(mock_config(), encoding="utf-8")
    code, _, err = await habakkuk(home, "computer", "view")
    assert code == 1 and "main has no desktop running" in err
    code, _, err = await habakkuk(home, "computer", "view", "nobody")
    assert code != 0 and 'no agent named "nobody"' in err and "Traceback" not in err
    linux = mock_config() + "    computer:\n      backend: linux\n"
    home.config_path.write_text(linux, encoding="utf-8")
    code, out, _ = await habakkuk(home, "computer", "view")
    assert code == 0 and "drives the screen in front of you" in out.decode()


def test_a_capture_is_drawn_with_half_blocks_two_pixels_a_cell() -> None:
    image = Image.new("RGB", (40, 20), (255, 0, 0))
    image.paste((0, 0, 255), (0, 10, 40, 20))  # the lower half blue
    out = io.BytesIO()
    image.save(out, "PNG")
    drawing = half_blocks(out.getvalue(), columns=20, rows=100)
    lines = drawing.split("\n")
    assert len(lines) == 5  # 20 columns wide keeps the aspect: 10 pixel rows, 2 a cell
    assert all(line.count(UPPER_HALF) == 20 and line.endswith("\x1b[0m") for line in lines)
    assert "\x1b[38;2;255;0;0m\x1b[48;2;255;0;0m" in lines[0]
    assert "\x1b[38;2;0;0;255m\x1b[48;2;0;0;255m" in lines[-1]
