"""The admin HTTP endpoint (off unless admin.port / --admin-port is set):

    GET    /                302 to /console/ (a browser pointed at the endpoint lands on the console)
    GET    /healthz         200 "ok" while the broker serves, 503 once it is stopping
    GET    /metrics         Prometheus text format (broker/metrics.py)
    GET    /faults          the faults set, as JSON
    POST   /faults          set a fault: a JSON object (broker/faults.py); 201 with it
    DELETE /faults          remove every fault
    DELETE /faults/<id>     remove one
    /console/...            the web console (console/), when the broker has one

HTTP itself is aiohttp's server, on the broker's own event loop: keep-alive, chunked
bodies, percent-decoding, header limits and the parser's errors (400) are the library's,
not ours. What is ours is who may do what, written once in `_guard` (a middleware every
request passes):

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

Reads: /healthz answers anyone who reaches the port (a container health check). Every
other read (/metrics names topics; the console shows records) answers only requests
that name this endpoint in their Host header (a loopback address, or the `admin.host` it
listens on), so a DNS-rebinding page cannot read them through the operator's browser,
or that carry the token (Prometheus from another container: its bearer token). On a
broker with SASL listeners or an authorizer, the console asks every reader to sign in
(HTTP Basic with the broker's own users, or the token), and /metrics and /faults ask it
of readers on other machines. Who may read what (the authorizer as that principal, the
console kept to this machine on a broker without security) is access.py's.

Every answer of ours carries the security headers below, and no header or body of a
request may be repeated where one is meant (a second Host, Authorization...): 400.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ottla.broker.faults import Faults, FaultSpecError
from ottla.broker.http_site import BodyTimeout, HttpSite, host_of, is_loopback, read_body
from ottla.broker.logging import get_logger
from ottla.broker.security.authorizer import CLUSTER_NAME, Operation, ResourceType

from .access import AdminAccess, Principal, TooManyAttempts

if TYPE_CHECKING:
    from .app import WebConsole

log = get_logger("ottla.admin")

_MAX_BODY = 64 * 1024
# Sent with every answer: the console's pages run no script but their own (no inline
# script, nothing from elsewhere, whatever a record's value holds), cannot be framed by
# another page (clickjacking a delete button), and no answer is sniffed into HTML.
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "Referrer-Policy": "no-referrer",
}
_CHANGES = ("POST", "DELETE", "PUT", "PATCH")
# Headers a request may carry once: two Hosts (or two tokens) would let two readers of
# the request see two different ones.
_SINGLE_HEADERS = ("Host", "Origin", "Authorization", "Content-Type", "Content-Length", "Transfer-Encoding")
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
_REALM = 'Basic realm="Ottla", charset="UTF-8"'
# Where the endpoint's root sends a browser: the console.
CONSOLE_PATH = "/console/"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class HttpRequest:
    """What the console reads of a request, past the guard."""

    method: str
    path: str  # percent-decoded, without a trailing "/"
    peer: str  # the client's address
    query: str = ""  # the raw query string (params.py decodes it)
    body: bytes = b""
    principal: Principal | None = None
    # (operation, resource type, name) -> allowed, for this principal from this peer
    allows: Callable[[Operation, ResourceType, str], bool] = lambda *_: True


class AdminServer:
    """Serves the routes above from what the broker hands it: the faults, the metrics
    text, and whether it is stopping."""

    def __init__(self, faults: Faults, metrics_text: Callable[[], str], stopping: Callable[[], bool],
                 token: str | None = None, console: WebConsole | None = None,
                 access: AdminAccess | None = None,
                 parse_console_schemas: Callable[[], Awaitable[bool]] | None = None) -> None:
        self.faults = faults
        self.console = console
        self.metrics_text = metrics_text
        self.stopping = stopping
        self.token = token
        self.access = access or AdminAccess(token, has_authorizer=False, sasl=False, plain_users={},
                                            stores=lambda: (None, None), remote_console=False)
        self.host = ""
        self._site = HttpSite("admin")
        # The schema registry parses, in its worker, the schemas a console page noted it
        # needs (console/schema_decoding.py); whether there were any.
        self._parse_console_schemas = parse_console_schemas

    @property
    def port(self) -> int:
        return self._site.port

    async def start(self, host: str, port: int) -> None:
        self.host = host
        app = web.Application(middlewares=[_answer_headers, self._guard], client_max_size=_MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        await self._site.start(app, host, port)

    async def stop(self) -> None:
        await self._site.stop()

    # --- the rules, once for every request ----------------------------------------------------

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        for name in _SINGLE_HEADERS:
            if len(request.headers.getall(name, ())) > 1:
                return _json(400, {"error": f"a repeated {name} header"})
        path = request.path.rstrip("/") or "/"
        if path == "/healthz":
            return await handler(request)
        peer = request.remote or ""
        host = request.headers.get("Host", "")
        access = self.access
        try:
            principal = await access.sign_in(request.headers.get("Authorization", ""), peer)
        except TooManyAttempts as exc:
            return _json(429, {"error": str(exc)}, {"Retry-After": str(max(1, round(exc.retry_after)))})
        body = b""
        if request.body_exists:  # read here, in time or not at all; the handlers get it from aiohttp's cache
            try:
                body = await read_body(request)
            except BodyTimeout:
                return _json(408, {"error": "the body did not arrive in time"}, {"Connection": "close"})
        if request.method in _CHANGES:
            refused = self._refuse_change(request, host, peer, body)
        else:
            refused = self._refuse_read(path, host, peer, principal)
        if refused is not None:
            return refused
        console = path == "/console" or path.startswith("/console/")
        # The console shows records: on a secured broker, only to a principal the
        # authorizer can judge. /metrics and /faults are the operator's, under the rules
        # of changes: from this machine, or with the token (or a principal with CLUSTER
        # DESCRIBE/ALTER) from elsewhere.
        if access.secured and principal is None and (console or not is_loopback(peer)):
            return _json(401, {"error": "this broker has SASL users or ACLs: sign in as one of its users "
                                        "(HTTP Basic) or with admin.token"}, {"WWW-Authenticate": _REALM})
        if not console and principal is not None:
            operation = Operation.ALTER if request.method in _CHANGES else Operation.DESCRIBE
            if not access.allows(principal, operation, ResourceType.CLUSTER, CLUSTER_NAME, peer):
                return _json(403, {"error": f"{principal} may not {operation.name} the cluster"})
        request["principal"] = principal
        return await handler(request)

    def _names_this_endpoint(self, host: str) -> bool:
        return is_loopback(host) or host_of(host) == self.host

    def _refuse_read(self, path: str, host: str, peer: str, principal: Principal | None) -> web.Response | None:
        operator = principal is not None and principal.operator
        if not operator and not self._names_this_endpoint(host):
            return _json(403, {"error": f"this endpoint answers requests addressed to it, not {host!r}"})
        if path.startswith("/console") and not self.access.secured and not self.access.remote_console \
                and not operator and not is_loopback(peer):
            return _json(403, {"error": "the console of a broker without SASL users or ACLs answers this machine "
                                        "only (admin.console.remote=true opens it, admin.token lets a holder in)"})
        return None

    def _refuse_change(self, request: web.Request, host: str, peer: str, body: bytes) -> web.Response | None:
        """Why a request that changes something may not, or None if it may."""
        headers = request.headers
        origin = headers.get("Origin")
        if origin is not None and origin.partition("://")[2].rstrip("/") != host:
            return _json(403, {"error": f"a change from another origin ({origin}) is refused"})
        if self.token is not None:
            scheme, _, _given = headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not self.access.holds_token(headers.get("Authorization", "")):
                return _json(401, {"error": "a change needs Authorization: Bearer <admin.token>"})
        elif not (is_loopback(peer) and is_loopback(host)):
            return _json(403, {"error": "without admin.token, changes are accepted from this machine only "
                                        f"(from {peer}, addressed to {host!r})"})
        if body and headers.get("Content-Type", "").split(";")[0].strip().lower() != "application/json":
            return _json(415, {"error": "a body must be application/json"})
        return None

    # --- the routes ---------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        body = await request.read() if request.body_exists else b""
        if self.console is not None and path == "/" and request.method == "GET":
            redirect = _response(302, "text/plain; charset=utf-8", f"The console: {CONSOLE_PATH}\n".encode())
            redirect.headers["Location"] = CONSOLE_PATH
            return redirect
        if self.console is not None and (path == "/console" or path.startswith("/console/")):
            principal: Principal | None = request.get("principal")
            peer = request.remote or ""
            access = self.access
            console_request = HttpRequest(
                request.method, path, peer, query=request.rel_url.raw_query_string, body=body, principal=principal,
                allows=lambda operation, resource_type, name: access.allows(principal, operation, resource_type,
                                                                            name, peer))
            try:
                status, content_type, answer = self.console.handle(console_request)
                # A page decoding records with schemas not parsed yet noted them: they are
                # parsed off the event loop, then the page is rendered again with them.
                if request.method == "GET" and self._parse_console_schemas is not None \
                        and await self._parse_console_schemas():
                    status, content_type, answer = self.console.handle(console_request)
            except Exception:  # a page's bug must not cost more than that page
                log.exception("console page failed", path=path)
                return _json(500, {"error": "the console failed on this page; see the broker's log"})
            return _response(status, content_type, answer)
        return _response(*self.route(request.method, path, body))

    def route(self, method: str, path: str, body: bytes) -> tuple[int, str, bytes]:
        faults = self.faults
        if path == "/healthz" and method == "GET":
            return (503, "text/plain", b"stopping\n") if self.stopping() else (200, "text/plain", b"ok\n")
        if path == "/metrics" and method == "GET":
            return 200, PROMETHEUS_TEXT, self.metrics_text().encode()
        if path == "/faults":
            if method == "GET":
                return _json_body(200, {"faults": [f.describe() for f in faults.active()]})
            if method == "POST":
                try:
                    spec = json.loads(body or b"{}")
                    if not isinstance(spec, dict):
                        raise FaultSpecError("a fault is a JSON object")
                    fault = faults.add(spec)
                except (ValueError, FaultSpecError) as exc:
                    return _json_body(400, {"error": str(exc)})
                return _json_body(201, fault.describe())
            if method == "DELETE":
                faults.clear()
                return _json_body(200, {"faults": []})
            return _json_body(405, {"error": f"{method} /faults"})
        if path.startswith("/faults/") and method == "DELETE":
            fault_id = path[len("/faults/"):]
            if fault_id.isdigit() and faults.remove(int(fault_id)):
                return _json_body(200, {"removed": int(fault_id)})
            return _json_body(404, {"error": f"no fault {fault_id}"})
        return _json_body(404, {"error": f"no route {method} {path}"})


@web.middleware
async def _answer_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The security headers on every answer, the library's own errors (413...) included."""
    try:
        response = await handler(request)
    except web.HTTPException as exc:  # the library's refusals (a body over 64 KiB: 413) as JSON, as ours
        response = _json(exc.status, {"error": exc.text or exc.reason}) if exc.status >= 400 else exc
    response.headers.update(SECURITY_HEADERS)
    response.headers["Server"] = "Ottla"  # not the library's name and version
    return response


def _response(status: int, content_type: str, body: bytes) -> web.Response:
    return web.Response(status=status, body=body, headers={"Content-Type": content_type})


def _json_body(status: int, value: Any) -> tuple[int, str, bytes]:
    return status, "application/json", (json.dumps(value) + "\n").encode()


def _json(status: int, value: Any, headers: dict[str, str] | None = None) -> web.Response:
    response = _response(*_json_body(status, value))
    if headers:
        response.headers.update(headers)
    return response
