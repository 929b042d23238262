"""The doctor's check of each agent that uses the computer toolsets: the programs its
backend runs are installed (spec 000 "Computer": every backend drives command-line tools),
so a missing one is said before the agent's first action fails on it."""

from __future__ import annotations

import os
import shutil
from typing import Literal

from habakkuk.engine.config import Config
from habakkuk.engine.i18n import t

Found = tuple[Literal["ok", "FAIL"], str, str]
COMPUTER_TOOLSETS = ("computer", "computer-open")
# Programs each backend needs, each with the Debian package (or Mac tool) that brings it;
# a tuple of alternatives needs any one of them.
NEEDED: dict[str, list[tuple[tuple[str, ...], str]]] = {
    "xvfb": [(("Xvfb",), "xvfb"), (("xdotool",), "xdotool"),
             (("import", "scrot", "ffmpeg"), "imagemagick")],
    "x11": [(("xdotool",), "xdotool"), (("import", "scrot", "ffmpeg"), "imagemagick")],
    "wayland": [(("grim",), "grim"), (("ydotool",), "ydotool")],
    "macos": [(("screencapture",), "macOS"), (("osascript",), "macOS")],
}  # fmt: skip


def computer_checks(config: Config, environ: dict[str, str] | None = None) -> list[Found]:
    """One check per agent that lists a computer toolset."""
    env = dict(os.environ) if environ is None else environ
    path = env.get("PATH", os.defpath)
    checks: list[Found] = []
    for name, agent in config.agents.items():
        if not any(toolset in agent.toolsets for toolset in COMPUTER_TOOLSETS):
            continue
        kind = _kind(agent.computer.backend, env)
        found, missing = [], []
        for alternatives, package in NEEDED[kind]:
            program = next((p for p in alternatives if shutil.which(p, path=path)), None)
            if program is None:
                missing.append((alternatives[0], package))
            else:
                found.append(program)
        where = f"computer ({name})"
        if missing:
            programs = ", ".join(program for program, _ in missing)
            packages = ", ".join(sorted({package for _, package in missing}))
            detail = t("computer.doctor.missing", backend=kind, programs=programs,
                       packages=packages)  # fmt: skip
            checks.append(("FAIL", where, detail))
        else:
            checks.append(("ok", where, t("computer.doctor.ready", backend=kind,
                                          programs=", ".join(found))))  # fmt: skip
    return checks


def _kind(backend: str, env: dict[str, str]) -> str:
    """The backend as the programs see it: linux is Wayland or X by the session."""
    if backend != "linux":
        return backend
    wayland = env.get("WAYLAND_DISPLAY") and (
        env.get("XDG_SESSION_TYPE") == "wayland" or not env.get("DISPLAY")
    )
    return "wayland" if wayland else "x11"
