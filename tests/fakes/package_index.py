"""A fake Python package index on 127.0.0.1 speaking the real wires: PyPI's JSON API
(GET /pypi/{name}/json: info.version and releases, each a list of files with `yanked`),
the PEP 691 simple JSON (GET /simple/{name}/ with Accept
application/vnd.pypi.simple.v1+json) and the PEP 503 simple HTML page (data-yanked on a
yanked file's anchor). `json_api=False` answers the JSON API with 404, as a plain simple
index (a devpi or a static mirror) does; `pep691=False` answers the simple page in HTML
only. `ThreadedIndex` runs it in a thread for the synchronous CLI."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web

from tests.fakes.loopback import Threaded, serve_on_loopback

SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"


@dataclass
class FakeIndex:
    """Releases by version: each a list of (filename, yanked)."""

    releases: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)
    json_api: bool = True
    pep691: bool = True
    seen: list[str] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def simple(self) -> str:
        """The index URL as pip's index-url names it."""
        return f"http://127.0.0.1:{self.port}/simple"

    def release(self, version: str, *, yanked: bool = False) -> None:
        """Publish `version` as a wheel and an sdist."""
        self.releases[version] = [
            (f"habakkuk-{version}-py3-none-any.whl", yanked),
            (f"habakkuk-{version}.tar.gz", yanked),
        ]

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/pypi/{name}/json", self._json_api)
        app.router.add_get("/simple/{name}/", self._simple)
        self._runner, self.port = await serve_on_loopback(app)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _known(self, request: web.Request) -> bool:
        self.seen.append(request.path)
        return request.match_info["name"] == "habakkuk" and bool(self.releases)

    async def _json_api(self, request: web.Request) -> web.Response:
        if not self._known(request) or not self.json_api:
            return web.json_response({"message": "Not Found"}, status=404)
        live = [v for v, files in self.releases.items() if not all(y for _, y in files)]
        return web.json_response(
            {
                "info": {"name": "habakkuk", "version": live[-1] if live else ""},
                "releases": {
                    version: [{"filename": name, "yanked": yanked} for name, yanked in files]
                    for version, files in self.releases.items()
                },
            }
        )

    async def _simple(self, request: web.Request) -> web.Response:
        if not self._known(request):
            return web.Response(status=404, text="Not Found")
        files = [item for listed in self.releases.values() for item in listed]
        if self.pep691 and SIMPLE_JSON in request.headers.get("Accept", ""):
            body = {
                "meta": {"api-version": "1.1"},
                "name": "habakkuk",
                "files": [{"filename": name, "yanked": yanked} for name, yanked in files],
            }
            return web.json_response(body, content_type=SIMPLE_JSON)
        anchors = "".join(
            f'<a href="/files/{name}"{" data-yanked" if yanked else ""}>{name}</a><br>'
            for name, yanked in files
        )
        return web.Response(text=f"<html><body>{anchors}</body></html>", content_type="text/html")


class ThreadedIndex(Threaded[FakeIndex]):
    """A FakeIndex on its own loop in a daemon thread (for the synchronous CLI)."""

    def __init__(self, index: FakeIndex) -> None:
        super().__init__(index)
