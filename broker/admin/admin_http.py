"""The admin HTTP endpoint (off unless admin.port / --admin-port is set):

    GET    /                302 to /console/ (a browser pointed at the endpoint lands on the console)
    GET    /healthz         200 "ok" while the broker serves, 503 once it is stopping
    GET    /metrics         Prometheus text format (broker/admin/metrics.py)
    GET    /faults          the faults set, as JSON
    POST   /faults          set a fault: a JSON object (broker/admin/faults.py); 201 with it
    DELETE /faults          remove every fault
    DELETE /faults/<id>     remove one
    /console/...            the web console (broker/admin/web_console/), when the broker has one

A few routes for health checks, Prometheus and test harnesses do not need a framework:
this is a minimal HTTP/1.1 server on asyncio, one request per connection.

Faults can close every client connection, so a request that changes anything (POST,
DELETE) must come from someone entitled to it, not from a web page the operator happens
to have open:

- the endpoint listens on 127.0.0.1 unless `admin.host` says otherwise;
- with `admin.token` set, a change needs `Authorization: Bearer <token>` (401);
- without one, a change must come from a loopback address and name one in its Host
  header (403): the first keeps out other machines (the endpoint may listen on every
  interface, as in the container image), the second a DNS-rebinding page
  (Host: attacker.example);
- a change sent by a browser from another origin (its Origin header differs from the
  Host) is refused (403), and a body must be `application/json` (415), which a
  cross-site form or a "simple" fetch cannot send without a preflight that this
  endpoint never approves.

GET routes change nothing and answer anyone who can reach the port (Prometheus, a
container health check). The console's pages (/console) show records, so they answer
only requests that name this endpoint in their Host header (a loopback address, or the
`admin.host` it listens on): a DNS-rebinding page cannot read them through the
operator's browser.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from .faults import Faults, FaultSpecError
from ..logging import get_logger

if TYPE_CHECKING:
    from .web_console.app import WebConsole

log = get_logger("ottla.admin")


_MAX_BODY = 64 * 1024
_READ_TIMEOUT = 10
_MAX_HEADERS = 100
_REASONS = {200: "OK", 201: "Created", 302: "Found", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large", 415: "Unsupported Media Type",
            431: "Request Header Fields Too Large", 500: "Internal Server Error", 503: "Service Unavailable"}
# Sent with every answer: the console's pages run no script but their own (no inline
# script, nothing from elsewhere, whatever a record's value holds), cannot be framed by
# another page (clickjacking a delete button), and no answer is sniffed into HTML.
_SECURITY_HEADERS = ("X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n"
                     "Content-Security-Policy: default-src 'self'; frame-ancestors 'none'; form-action 'self'\r\n"
                     "Referrer-Policy: no-referrer\r\n")
_CHANGES = ("POST", "DELETE", "PUT", "PATCH")
# Where the endpoint's root sends a browser: the one answer with status 302.
CONSOLE_PATH = "/console/"


@dataclass
class HttpRequest:
    method: str
    path: str
    peer: str  # the client's address
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    body: bytes = b""
    query: str = ""  # after the "?" of the target
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


class AdminServer:
    """Serves the routes above from what the broker hands it: the faults, the metrics
    text, and whether it is stopping."""

    def __init__(self, faults: Faults, metrics_text: Callable[[], str], stopping: Callable[[], bool],
                 token: str | None = None, console: "WebConsole | None" = None) -> None:
        self.faults = faults
        self.console = console
        self.metrics_text = metrics_text
        self.stopping = stopping
        self.token = token
        self.host = ""
        self.port = 0
        self._server: asyncio.AbstractServer | None = None

    async def start(self, host: str, port: int) -> None:
        self.host = host
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            peer = (writer.get_extra_info("peername") or ("",))[0]
            status, content_type, body = await asyncio.wait_for(self._answer(reader, peer), _READ_TIMEOUT)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError):
            writer.close()
            return
        location = f"Location: {CONSOLE_PATH}\r\n" if status == 302 else ""
        head = (f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n{location}"
                f"Content-Length: {len(body)}\r\n{_SECURITY_HEADERS}Connection: close\r\n\r\n")
        writer.write(head.encode() + body)
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    async def _answer(self, reader: asyncio.StreamReader, peer: str) -> tuple[int, str, bytes]:
        request_line = (await reader.readline()).decode("latin-1").split()
        if len(request_line) != 3:
            raise ValueError("not an HTTP request")
        method, target, _version = request_line
        path, _, query = target.partition("?")
        request = HttpRequest(method.upper(), path.rstrip("/") or "/", peer, query=query)
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            if len(request.headers) >= _MAX_HEADERS:
                return _json(431, {"error": "too many headers"})
            name, _, value = line.decode("latin-1").partition(":")
            request.headers[name.strip().lower()] = value.strip()
        length = int(request.headers.get("content-length", "0"))
        if length > _MAX_BODY:
            return _json(413, {"error": "body too large"})
        request.body = await reader.readexactly(length) if length > 0 else b""
        if request.method in _CHANGES:
            refused = self._refuse_change(request)
            if refused is not None:
                return refused
        if self.console is not None and request.path == "/" and request.method == "GET":
            return 302, "text/plain; charset=utf-8", f"The console: {CONSOLE_PATH}\n".encode()
        if self.console is not None and (request.path == "/console" or request.path.startswith("/console/")):
            host = request.headers.get("host", "")
            if not (_is_loopback(host) or _host_of(host) == self.host):
                return _json(403, {"error": f"the console answers requests addressed to this endpoint, not {host!r}"})
            try:
                return self.console.handle(request)
            except Exception:  # a page's bug must not cost more than that page
                log.exception("console page failed", path=request.path)
                return _json(500, {"error": "the console failed on this page; see the broker's log"})
        return self.route(request.method, request.path, request.body)

    def _refuse_change(self, request: HttpRequest) -> tuple[int, str, bytes] | None:
        """Why a request that changes something may not, or None if it may."""
        headers = request.headers
        host = headers.get("host", "")
        origin = headers.get("origin")
        if origin is not None and origin.partition("://")[2].rstrip("/") != host:
            return _json(403, {"error": f"a change from another origin ({origin}) is refused"})
        if self.token is not None:
            scheme, _, given = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
                return _json(401, {"error": "a change needs Authorization: Bearer <admin.token>"})
        elif not (_is_loopback(request.peer) and _is_loopback(host)):
            return _json(403, {"error": "without admin.token, changes are accepted from this machine only "
                                        f"(from {request.peer}, addressed to {host!r})"})
        if request.body and headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return _json(415, {"error": "a body must be application/json"})
        return None

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


def _host_of(address: str) -> str:
    """The host of a Host header or a peer address, without its port."""
    host = address
    if host.startswith("[") or host.count(":") == 1:  # [::1]:9644, 127.0.0.1:9644, localhost:9644
        host = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return host.strip("[]")


def _is_loopback(address: str) -> bool:
    """Whether a Host header or a peer address names a loopback address (any port)."""
    host = _host_of(address)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _json(status: int, value: Any) -> tuple[int, str, bytes]:
    return status, "application/json", (json.dumps(value) + "\n").encode()
