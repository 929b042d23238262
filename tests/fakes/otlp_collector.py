"""A fake OTLP/HTTP collector on 127.0.0.1: POST /v1/traces with the protobuf body the
OpenTelemetry exporter sends (ExportTraceServiceRequest), decoded and kept."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.fakes.loopback import serve_on_loopback


@dataclass
class ReceivedSpan:
    """One span as the collector decoded it."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    status: int
    attributes: dict[str, Any]
    service: str


@dataclass
class FakeCollector:
    """Collects spans; `status` is what it answers, `hold` (when set) blocks each
    request until released, `waiting` counts requests held."""

    status: int = 200
    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0
    headers: list[dict[str, str]] = field(default_factory=list)
    hold: asyncio.Event | None = None
    waiting: int = 0
    url: str = ""
    _runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner, port = await serve_on_loopback(app)
        self.url = f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self.hold is not None:
            self.hold.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _traces(self, request: web.Request) -> web.Response:
        assert request.content_type == "application/x-protobuf"
        body = await request.read()
        self.requests += 1
        self.headers.append(dict(request.headers))
        if self.hold is not None:
            self.waiting += 1
            await self.hold.wait()
        if self.status != 200:
            return web.Response(status=self.status, text="no")
        message = ExportTraceServiceRequest.FromString(body)
        for resource_spans in message.resource_spans:
            service = ""
            for attribute in resource_spans.resource.attributes:
                if attribute.key == "service.name":
                    service = attribute.value.string_value
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            status=span.status.code,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            service=service,
                        )
                    )
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(),
            content_type="application/x-protobuf",
        )


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None
