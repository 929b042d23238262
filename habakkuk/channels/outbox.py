"""The channels' outbox: how anything in Habakkuk sends to a chat.

`Outbox` queues typed deliveries as durable jobs on a job queue; the process
holding the channel account's connection sends them. The running
`ChannelService` is an Outbox; a process without running channels (the CLI
commands, a runtime whose channels run in `habakkuk serve`) uses
`Outbox(queue)` on the same control.db. Nobody outside `delivery_types`
builds a delivery job's payload.
"""

from __future__ import annotations

from pathlib import Path

from habakkuk.engine.jobs import JobQueue

from .adapter import Address, Button
from .deliveries import enqueue_delivery
from .delivery_types import Delivery, FileDelivery, PollDelivery, TextDelivery


def _address(to: Address | str) -> Address:
    return to if isinstance(to, Address) else Address.parse(to)


class Outbox:
    """Queues deliveries (idempotent by job id); each method returns True when it was new."""

    def __init__(self, queue: JobQueue):
        self.queue = queue

    async def send(self, delivery: Delivery, job_id: str) -> bool:
        """Queue `delivery` as the job `job_id`."""
        return await enqueue_delivery(self.queue, job_id, delivery)

    async def send_text(
        self,
        job_id: str,
        to: Address | str,
        text: str,
        *,
        reply_to: str | None = None,
        buttons: tuple[tuple[Button, ...], ...] = (),
    ) -> bool:
        """Queue a message; ValueError when `to` is not CHANNEL:CHAT[:THREAD]."""
        delivery = TextDelivery(_address(to), text, reply_to=reply_to, buttons=buttons)
        return await self.send(delivery, job_id)

    async def send_file(
        self,
        job_id: str,
        to: Address | str,
        path: Path,
        name: str = "",
        caption: str = "",
        *,
        voice: bool = False,
        duration: float | None = None,
    ) -> bool:
        """Queue a file (shown as `name`, else the path's name) with a caption; `voice`: a
        voice note (Ogg Opus) of `duration` seconds."""
        delivery = FileDelivery(_address(to), path, name, caption, voice, duration)
        return await self.send(delivery, job_id)

    async def send_poll(
        self,
        job_id: str,
        to: Address | str,
        question: str,
        options: list[str],
        multiple: bool = False,
    ) -> bool:
        """Queue a poll (numbered text where the channel has no polls)."""
        delivery = PollDelivery(_address(to), question, tuple(options), multiple)
        return await self.send(delivery, job_id)
