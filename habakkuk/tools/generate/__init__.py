"""Image and video generation (spec 000 "Media": Images, Video): the tools
(image_generate, video_generate), one module per provider (openai, gemini, fal), and the
journal that makes each call's paid job durable across crashes (journal.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from habakkuk.engine.config import Config
    from habakkuk.engine.home import Environment
    from habakkuk.engine.toolkit.registry import Tool

    from .types import UsageLog


def generation_tools(
    config: Config, usage: UsageLog | None, env: Environment | None = None
) -> list[Tool]:
    """The generation tools whose section config.yaml has (`images:`, `video:`), reading
    their keys from `env` (default: the process environment)."""
    from habakkuk.engine.home import Environment

    from .tools import ImageGenerate, VideoGenerate, image_provider, video_provider

    keys = (env or Environment()).get
    tools: list[Tool] = []
    if config.images is not None:
        tools.append(ImageGenerate(config.images, image_provider(config.images), usage, keys=keys))
    if config.video is not None:
        tools.append(VideoGenerate(config.video, video_provider(config.video), usage, keys=keys))
    return tools
