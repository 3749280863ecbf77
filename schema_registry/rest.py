"""Confluent Schema Registry's REST API (v1) on aiohttp, on its own listener.

Every answer is `application/vnd.schemaregistry.v1+json`; every error is Confluent's
{"error_code": ..., "message": ...} (errors.py), the HTTP library's own refusals (a
body too large: 413) included. The registry changes what every producer and consumer
of the broker decodes with, so who may use it is decided before any route:

- on a broker with SASL users or ACLs, every request signs in (HTTP Basic with one of
  the broker's users: 401 otherwise) and each route asks the broker's authorizer as
  that principal (access.py has the mapping: 403, error_code 40301);
- on a broker without, there is nobody to sign in: it answers this machine only,
  addressed by a loopback name or its own host (a DNS-rebinding page cannot reach it
  through a browser);
- either way a request from a browser page of another origin is refused, and a body
  must be JSON by its Content-Type (415), which a cross-site form cannot send without a
  preflight this endpoint never approves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from ottla.broker.http_site import BodyTimeout, HttpSite, host_of, is_loopback, read_body
from ottla.broker.logging import get_logger

from .access import ALTER_CLUSTER, READ, WRITE, RegistryAccess, SignInLimited, Unsecured, topic_of
from .errors import RegistryError, bad_request
from .registry import NotPrepared, SchemaRegistry, start_request

log = get_logger("ottla.schema_registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_JSON_TYPES = ("application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json", "application/json",
               "application/octet-stream")
# A schema of a few thousand fields is some hundreds of KiB; a record of `_schemas`
# stays well inside a batch.
MAX_BODY = 4 * 1024 * 1024
_SUBJECT = r"(?P<subject>[^/]+)"
_VERSION = r"(?P<version>[^/]+)"
_ID = r"(?P<id>[^/]+)"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Who may use a route (access.py has the mapping to the broker's ACLs).
PUBLIC = "public"  # any signed-in user
SUBJECT_READ = "subject-read"
SUBJECT_WRITE = "subject-write"
ID_READ = "id-read"  # a reader of some subject holding the id
LIST = "list"  # the answer is filtered to readable subjects
ID_LIST = "id-list"
GLOBAL_WRITE = "global-write"
# A subject's mode: WRITE on its topic, but IMPORT (which lets a client choose the ids
# every consumer decodes with) is the registry's, as in Confluent: ALTER on the cluster.
SUBJECT_MODE = "subject-mode"
_REALM = 'Basic realm="Ottla schema registry", charset="UTF-8"'
# Handler runs of one request that may each meet a schema not parsed yet (see `_run`):
# a request reads a handful; a bound, so that a subject changing under it cannot loop.
_MAX_PREPARE_ROUNDS = 16


class RawSchema(str):
    """A schema's own text, sent as the body itself (`.../schema` endpoints), not as a JSON string."""


def _answer(value: Any, status: int = 200) -> web.Response:
    body = value.encode() if isinstance(value, RawSchema) else json.dumps(value).encode()
    return web.Response(status=status, body=body, content_type=CONTENT_TYPE)


def _error(exc: RegistryError) -> web.Response:
    return _answer(exc.body(), exc.status)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


def _schema_id(text: str) -> int:
    if not text.lstrip("-").isdigit():
        raise RegistryError(404, 40403, f"Schema {text} not found")
    return int(text)


class Path:
    """The parts a route's pattern matched in the raw path, percent-decoded."""

    def __init__(self, match: re.Match[str]) -> None:
        self._parts = {name: unquote(value) for name, value in match.groupdict().items()}

    def __getitem__(self, name: str) -> str:
        return self._parts[name]

    def get(self, name: str) -> str | None:
        return self._parts.get(name)


class SchemaRegistryServer:
    def __init__(self, registry: SchemaRegistry, access: RegistryAccess | None = None) -> None:
        self.registry = registry
        self.access: RegistryAccess = access or Unsecured()
        self.host = ""
        self._site = HttpSite("schema_registry")
        r = registry
        # (method, path pattern, who may (see _authorize), handler(match, request, body) -> JSON value)
        routes: list[tuple[str, str, str, Callable[..., Any]]] = [
            ("GET", "/", PUBLIC, lambda m, q, b: {}),
            ("GET", "/schemas/types", PUBLIC, lambda m, q, b: r.schema_types()),
            ("GET", f"/schemas/ids/{_ID}", ID_READ,
             lambda m, q, b: r.schema_by_id(_schema_id(m["id"]), q.query.get("format"))),
            ("GET", f"/schemas/ids/{_ID}/schema", ID_READ,
             lambda m, q, b: RawSchema(r.schema_text_by_id(_schema_id(m["id"])))),
            ("GET", f"/schemas/ids/{_ID}/versions", ID_LIST,
             lambda m, q, b: r.id_versions(_schema_id(m["id"]), _flag(q, "deleted"))),
            ("GET", f"/schemas/ids/{_ID}/subjects", ID_LIST,
             lambda m, q, b: r.id_subjects(_schema_id(m["id"]), _flag(q, "deleted"))),
            ("GET", "/subjects", LIST,
             lambda m, q, b: r.subjects(_flag(q, "deleted"), q.query.get("subjectPrefix", ""))),
            ("POST", f"/subjects/{_SUBJECT}", SUBJECT_READ,
             lambda m, q, b: r.lookup(m["subject"], b, _flag(q, "normalize"), _flag(q, "deleted"),
                                      q.query.get("format"))),
            ("DELETE", f"/subjects/{_SUBJECT}", SUBJECT_WRITE,
             lambda m, q, b: r.delete_subject(m["subject"], _flag(q, "permanent"))),
            ("GET", f"/subjects/{_SUBJECT}/versions", SUBJECT_READ,
             lambda m, q, b: r.versions(m["subject"], _flag(q, "deleted"))),
            ("POST", f"/subjects/{_SUBJECT}/versions", SUBJECT_WRITE,
             lambda m, q, b: r.register(m["subject"], b, _flag(q, "normalize"))),
            ("GET", f"/subjects/{_SUBJECT}/versions/{_VERSION}", SUBJECT_READ,
             lambda m, q, b: r.get_version(m["subject"], m["version"], _flag(q, "deleted"), q.query.get("format"))),
            ("DELETE", f"/subjects/{_SUBJECT}/versions/{_VERSION}", SUBJECT_WRITE,
             lambda m, q, b: r.delete_version(m["subject"], m["version"], _flag(q, "permanent"))),
            ("GET", f"/subjects/{_SUBJECT}/versions/{_VERSION}/schema", SUBJECT_READ,
             lambda m, q, b: RawSchema(r.get_version_schema(m["subject"], m["version"], _flag(q, "deleted")))),
            ("GET", f"/subjects/{_SUBJECT}/versions/{_VERSION}/referencedby", SUBJECT_READ,
             lambda m, q, b: r.referenced_by(m["subject"], m["version"])),
            ("POST", f"/compatibility/subjects/{_SUBJECT}/versions/{_VERSION}", SUBJECT_READ,
             lambda m, q, b: r.check_compatibility(m["subject"], m["version"], b, _flag(q, "verbose"),
                                                   _flag(q, "normalize"))),
            ("POST", f"/compatibility/subjects/{_SUBJECT}/versions", SUBJECT_READ,
             lambda m, q, b: r.check_compatibility(m["subject"], None, b, _flag(q, "verbose"),
                                                   _flag(q, "normalize"))),
            ("GET", "/config", PUBLIC, lambda m, q, b: r.get_config(None)),
            ("PUT", "/config", GLOBAL_WRITE, lambda m, q, b: r.put_config(None, b)),
            ("DELETE", "/config", GLOBAL_WRITE, lambda m, q, b: r.delete_config(None)),
            ("GET", f"/config/{_SUBJECT}", SUBJECT_READ,
             lambda m, q, b: r.get_config(m["subject"], _flag(q, "defaultToGlobal"))),
            ("PUT", f"/config/{_SUBJECT}", SUBJECT_WRITE, lambda m, q, b: r.put_config(m["subject"], b)),
            ("DELETE", f"/config/{_SUBJECT}", SUBJECT_WRITE, lambda m, q, b: r.delete_config(m["subject"])),
            ("GET", "/mode", PUBLIC, lambda m, q, b: r.get_mode(None)),
            ("PUT", "/mode", GLOBAL_WRITE, lambda m, q, b: r.put_mode(None, b, _flag(q, "force"))),
            ("GET", f"/mode/{_SUBJECT}", SUBJECT_READ,
             lambda m, q, b: r.get_mode(m["subject"], _flag(q, "defaultToGlobal"))),
            ("PUT", f"/mode/{_SUBJECT}", SUBJECT_MODE, lambda m, q, b: r.put_mode(m["subject"], b, _flag(q, "force"))),
            ("DELETE", f"/mode/{_SUBJECT}", SUBJECT_WRITE, lambda m, q, b: r.delete_mode(m["subject"])),
        ]
        self.routes = [(method, re.compile(pattern), kind, handler) for method, pattern, kind, handler in routes]

    async def start(self, host: str, port: int) -> None:
        self.host = host
        app = web.Application(middlewares=[_errors_as_confluent, self._guard], client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        await self._site.start(app, host, port)

    @property
    def port(self) -> int:
        return self._site.port

    async def stop(self) -> None:
        await self._site.stop()
        self.registry.close()

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        peer = request.remote or ""
        host = request.headers.get("Host", "")
        origin = request.headers.get("Origin")
        if origin is not None and origin.partition("://")[2].rstrip("/") != host:
            return _error(RegistryError(403, 40301, f"a request from another origin ({origin}) is refused"))
        if self.access.secured:
            try:
                principal = await self.access.sign_in(request.headers.get("Authorization", ""), peer)
            except SignInLimited as exc:
                limited = _answer({"error_code": 429, "message": f"HTTP 429 Too Many Requests: {exc}"}, 429)
                limited.headers["Retry-After"] = str(max(1, round(exc.retry_after)))
                return limited
            if principal is None:
                refused = _answer({"error_code": 401, "message": "Unauthorized"}, 401)
                refused.headers["WWW-Authenticate"] = _REALM
                return refused
            request["principal"] = principal
            return await handler(request)
        if not is_loopback(peer):
            return _error(RegistryError(403, 40301, "this schema registry answers this machine only (a broker "
                                                    "with SASL users or ACLs signs its users in instead)"))
        if not (is_loopback(host_of(host)) or host_of(host) == self.host):
            return _error(RegistryError(403, 40301, f"this schema registry answers requests addressed to it, "
                                                    f"not {host!r}"))
        return await handler(request)

    def _may(self, request: web.Request, action: str, subject: str) -> bool:
        principal = request.get("principal")
        if principal is None:
            return not self.access.secured
        return self.access.allows(principal, action, topic_of(subject), request.remote or "")

    def _authorize(self, request: web.Request, kind: str, match: Path) -> None:
        """Raise 40301 unless the signed-in principal may use this route (LIST and ID_LIST
        answers are filtered instead, in `_filter`)."""
        if not self.access.secured or kind in (PUBLIC, LIST, ID_LIST):
            return
        principal: str = request["principal"]
        if kind == GLOBAL_WRITE:
            if not self.access.allows(principal, ALTER_CLUSTER, "", request.remote or ""):
                raise RegistryError(403, 40301, "User is denied operation Write on the global config or mode")
        elif kind in (SUBJECT_READ, SUBJECT_WRITE, SUBJECT_MODE):
            action = READ if kind == SUBJECT_READ else WRITE
            if not self._may(request, action, match["subject"]):
                raise RegistryError(403, 40301, f"User is denied operation {action.capitalize()} on Subject: "
                                                f"{match['subject']}")
        elif kind == ID_READ:
            schema_id = _schema_id(match["id"])
            subjects = self.registry.id_subjects(schema_id, deleted=True)
            if not any(self._may(request, READ, subject) for subject in subjects):
                raise RegistryError(403, 40301, f"User is denied operation Read on Schema id {schema_id}")

    def _filter(self, request: web.Request, kind: str, answer: Any) -> Any:
        if not self.access.secured or kind not in (LIST, ID_LIST):
            return answer
        return [item for item in answer
                if self._may(request, READ, item["subject"] if isinstance(item, dict) else item)]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        # Matched before percent-decoding, so a subject may hold any character ("a/b" sent as
        # a%2Fb); each matched part is decoded on its own (Path).
        path = request.raw_path.partition("?")[0].rstrip("/") or "/"
        allowed = False
        for method, pattern, kind, handler in self.routes:
            raw = pattern.fullmatch(path)
            if raw is None:
                continue
            match = Path(raw)
            if method != request.method:
                allowed = True
                continue
            try:
                self._authorize(request, kind, match)
                body = await self._body(request)
                if kind == SUBJECT_MODE and self.access.secured and _sets_import(body) \
                        and not self.access.allows(request["principal"], ALTER_CLUSTER, "", request.remote or ""):
                    raise RegistryError(403, 40301, f"User is denied operation Write on the mode of Subject: "
                                                    f"{match['subject']}: IMPORT mode needs ALTER on the cluster")
                return _answer(self._filter(request, kind, await self._run(handler, match, request, body)))
            except RegistryError as exc:
                return _error(exc)
        if allowed:
            return _answer({"error_code": 405, "message": "HTTP 405 Method Not Allowed"}, 405)
        return _answer({"error_code": 404, "message": "HTTP 404 Not Found"}, 404)

    async def _run(self, handler: Callable[..., Any], match: Path, request: web.Request, body: Any) -> Any:
        """The route's handler, on the event loop, with every schema it parses parsed
        before, in the registry's worker: what a POST sends and the subject's versions
        at once, anything else it meets (a stored PROTOBUF schema asked for
        `?format=serialized`) when it meets it, running it again then."""
        start_request()
        if request.method == "POST":
            await self.registry.prepare(match.get("subject"), body, _flag(request, "normalize"))
        for _ in range(_MAX_PREPARE_ROUNDS):
            try:
                return handler(match, request, body)
            except NotPrepared as missing:
                await self.registry.prepare_schema(missing.schema, missing.normalize)
        raise RegistryError(500, 50002, "Operation timed out: the schemas this request reads kept changing")

    async def _body(self, request: web.Request) -> Any:
        if request.method not in ("POST", "PUT"):
            return None
        try:
            raw = await read_body(request)
        except BodyTimeout:
            raise RegistryError(408, 408, "HTTP 408 Request Timeout: the body did not arrive in time") from None
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type not in _JSON_TYPES:
            raise RegistryError(415, 415, "HTTP 415 Unsupported Media Type")
        try:
            return json.loads(raw)
        except RecursionError:
            raise bad_request("Unexpected character: the JSON document is nested too deeply") from None
        except ValueError as exc:
            raise bad_request(f"Unrecognized token: {exc}") from None


def _sets_import(body: Any) -> bool:
    return isinstance(body, dict) and isinstance(body.get("mode"), str) and body["mode"].upper() == "IMPORT"


@web.middleware
async def _errors_as_confluent(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:  # the library's refusals (413...) as Confluent's error bodies
        if exc.status < 400:
            raise
        return _answer({"error_code": exc.status, "message": f"HTTP {exc.status} {exc.reason}"}, exc.status)
    except Exception:  # a bug in one request must cost only that request
        log.exception("schema registry request failed", path=request.path, method=request.method)
        return _answer({"error_code": 50001, "message": "Error in the backend data store"}, 500)
