"""The admin HTTP endpoint (off unless admin.port / --admin-port is set):

    GET    /healthz         200 "ok" while the broker serves, 503 once it is stopping
    GET    /metrics         Prometheus text format (broker/metrics.py)
    GET    /faults          the faults set, as JSON
    POST   /faults          set a fault: a JSON object (broker/faults.py); 201 with it
    DELETE /faults          remove every fault
    DELETE /faults/<id>     remove one

A few routes for health checks, Prometheus and test harnesses do not need a framework:
this is a minimal HTTP/1.1 server on asyncio, one request per connection.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

from .faults import Faults, FaultSpecError


_MAX_BODY = 64 * 1024
_READ_TIMEOUT = 10
_REASONS = {200: "OK", 201: "Created", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            413: "Payload Too Large", 503: "Service Unavailable"}
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


class AdminServer:
    """Serves the routes above from what the broker hands it: the faults, the metrics
    text, and whether it is stopping."""

    def __init__(self, faults: Faults, metrics_text: Callable[[], str], stopping: Callable[[], bool]) -> None:
        self.faults = faults
        self.metrics_text = metrics_text
        self.stopping = stopping
        self.port = 0
        self._server: asyncio.AbstractServer | None = None

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, content_type, body = await asyncio.wait_for(self._answer(reader), _READ_TIMEOUT)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError):
            writer.close()
            return
        head = (f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
        writer.write(head.encode() + body)
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[int, str, bytes]:
        request_line = (await reader.readline()).decode("latin-1").split()
        if len(request_line) != 3:
            raise ValueError("not an HTTP request")
        method, target, _version = request_line
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if length > _MAX_BODY:
            return _json(413, {"error": "body too large"})
        body = await reader.readexactly(length) if length else b""
        return self.route(method.upper(), target.split("?", 1)[0].rstrip("/") or "/", body)

    def route(self, method: str, path: str, body: bytes) -> tuple[int, str, bytes]:
        faults = self.faults
        if path == "/healthz" and method == "GET":
            return (503, "text/plain", b"stopping\n") if self.stopping() else (200, "text/plain", b"ok\n")
        if path == "/metrics" and method == "GET":
            return 200, PROMETHEUS_TEXT, self.metrics_text().encode()
        if path == "/faults":
            if method == "GET":
                return _json(200, {"faults": [f.describe() for f in faults.active()]})
            if method == "POST":
                try:
                    spec = json.loads(body or b"{}")
                    if not isinstance(spec, dict):
                        raise FaultSpecError("a fault is a JSON object")
                    fault = faults.add(spec)
                except (ValueError, FaultSpecError) as exc:
                    return _json(400, {"error": str(exc)})
                return _json(201, fault.describe())
            if method == "DELETE":
                faults.clear()
                return _json(200, {"faults": []})
            return _json(405, {"error": f"{method} /faults"})
        if path.startswith("/faults/") and method == "DELETE":
            fault_id = path[len("/faults/"):]
            if fault_id.isdigit() and faults.remove(int(fault_id)):
                return _json(200, {"removed": int(fault_id)})
            return _json(404, {"error": f"no fault {fault_id}"})
        return _json(404, {"error": f"no route {method} {path}"})


def _json(status: int, value: Any) -> tuple[int, str, bytes]:
    return status, "application/json", (json.dumps(value) + "\n").encode()
