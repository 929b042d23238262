"""The dashboard's static files: served without the token, installable, no data inside."""

from __future__ import annotations

from typing import Any

from tests.conftest import mock_config


async def test_the_manifest_and_service_worker_are_served(serve: Any) -> None:
    served = await serve(mock_config())
    for path, kind in (
        ("/app/manifest.webmanifest", "application/manifest+json"),
        ("/app/sw.js", "text/javascript"),
        ("/app/icon.svg", "image/svg+xml"),
        ("/app/icon-192.png", "image/png"),
    ):
        async with served.client.get(served.url + path) as response:
            assert response.status == 200, path
            assert response.content_type == kind
    async with served.client.get(served.url + "/app/sw.js") as response:
        worker = await response.text()
    assert "/api/" not in worker.split("SHELL = [", 1)[1].split("]", 1)[0]
