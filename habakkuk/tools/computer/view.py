"""What `habakkuk computer view` shows: the agent's Xvfb captured through its state file,
and a capture drawn in a terminal with half blocks (each character cell two pixels, the
upper one its foreground and the lower its background, in 24-bit colour)."""

from __future__ import annotations

import io
import os
from pathlib import Path

from .backend import Commands
from .x11 import X11Backend
from .xvfb import DesktopState, is_our_xvfb, read_state

UPPER_HALF = "\u2580"


def running_desktop(home: Path, agent: str) -> DesktopState | None:
    """The agent's desktop when its Xvfb still runs, else None."""
    state = read_state(home, agent)
    return state if state is not None and is_our_xvfb(state) else None


async def capture_desktop(state: DesktopState) -> bytes:
    """A PNG of the whole desktop, taken with the agent's cookie."""
    import asyncio

    env = {"PATH": os.environ.get("PATH", os.defpath), **state.env}
    image = (await X11Backend(Commands(env)).capture()).image
    return await asyncio.to_thread(as_png, image)


def as_png(image: bytes) -> bytes:
    """`image` (any format Pillow reads) as PNG bytes."""
    from PIL import Image

    if image.startswith(b"\x89PNG"):
        return image
    out = io.BytesIO()
    with Image.open(io.BytesIO(image)) as opened:
        opened.convert("RGB").save(out, "PNG", compress_level=1)
    return out.getvalue()


def half_blocks(png: bytes, columns: int, rows: int) -> str:
    """The image fitted (aspect kept) into `columns` x `rows` character cells, as lines of
    half blocks with 24-bit colour escapes, each line reset at its end."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as opened:
        image = opened.convert("RGB")
    scale = min(columns / image.width, (rows * 2) / image.height)
    width = max(1, int(image.width * scale))
    height = max(2, int(image.height * scale) // 2 * 2)
    data = image.resize((width, height), Image.Resampling.BOX).tobytes()  # RGB, row by row
    lines = []
    for y in range(0, height, 2):
        cells = []
        for x in range(width):
            at = (y * width + x) * 3
            top, bottom = data[at : at + 3], data[at + width * 3 : at + width * 3 + 3]
            cells.append(
                f"\x1b[38;2;{top[0]};{top[1]};{top[2]}m"
                f"\x1b[48;2;{bottom[0]};{bottom[1]};{bottom[2]}m{UPPER_HALF}"
            )
        lines.append("".join(cells) + "\x1b[0m")
    return "\n".join(lines)
