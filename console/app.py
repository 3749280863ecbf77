"""The web console's routes, under /console on the admin endpoint (admin_http.py).

    GET    /console, /console/topics     topics, searchable and paginated; create form
    GET    /console/topic?name=          partitions (log start, LSO, HW, size, segment files), configs
    GET    /console/messages?topic=&partition=&offset=|timestamp=&isolation=&format=&limit=
    GET    /console/messages/rows?...    the next rows as HTML, for the live tail (JSON)
    GET    /console/transactions, /console/transaction?id=
    GET    /console/producers?topic=&partition=
    GET    /console/groups, /console/group?id=
    GET    /console/schemas, /console/subject?name=   the schema registry's subjects (pages/schemas.py)
    GET    /console/broker               listeners, configs, rates, requests, errors, faults
    GET    /console/stats                the counters the Broker page's charts poll (JSON)
    GET    /console/static/<file>        the page's one script and one style sheet
    POST   /console/topics               create: {"name", "partitions", "configs": {...}}
    DELETE /console/topics/<name>        delete

Every request reaches this module only if it names the endpoint in its Host header
(admin_http: a DNS-rebinding page cannot read records through the operator's browser),
and, on a broker with SASL users or ACLs, only from a signed-in principal (access.py).
Every page shows what the Kafka API that returns the same data would answer the
principal, with that API's checks (`view.py` has the table): a topic listed with
DESCRIBE, its configs with DESCRIBE_CONFIGS, its records and producers with READ, a
group or a transactional id with DESCRIBE on it, the Broker page with DESCRIBE_CONFIGS
on the cluster; a topic is created with CREATE and deleted with DELETE, as CreateTopics
and DeleteTopics ask.
GET never changes anything. POST and DELETE reach this module only after the admin
endpoint's own guard let them through (admin.token, or a same-origin request from this
machine: admin_http.AdminServer._refuse_change); the fault controls of the Broker page
use the endpoint's existing /faults routes. The pages' script sends a change with
fetch() as application/json, which a cross-site form cannot, and with the token the user
typed, if admin.token is set.

Everything is computed when a page is asked for, on the event loop, in bounded work
(pages/, records.py): with no one looking, the console costs the broker nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any, Protocol

from ottla.broker.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from ottla.broker.services import MAX_PARTITIONS_PER_REQUEST
from ottla.coordinator.internal_topics import ClientAction, check_client_action
from ottla.protocol.errors import KafkaError

from .pages import broker as broker_pages
from .pages import groups, messages, producers, schemas, topics, transactions
from .pages.common import ConsoleBroker, NotFound, error_page, handle_kafka_error
from .params import Params
from .view import PrincipalView

HTML = "text/html; charset=utf-8"
JSON = "application/json"
_STATIC_TYPES = {"console.css": "text/css; charset=utf-8", "console.js": "text/javascript; charset=utf-8"}

Response = tuple[int, str, bytes]


class Request(Protocol):
    """What the console reads of a request (admin_http.HttpRequest)."""

    method: str
    path: str
    query: str
    body: bytes
    principal: Any  # access.Principal, None on a broker without security

    def allows(self, operation: Operation, resource_type: ResourceType, name: str) -> bool: ...


class Refused(Exception):
    """The principal may not see or do this (403 with this message)."""


# What a page asks of the principal, from its query: (parameter, operation, resource type).
_PAGE_CHECKS: dict[str, tuple[str, Operation, ResourceType]] = {
    "topic": ("name", Operation.DESCRIBE, ResourceType.TOPIC),
    "messages": ("topic", Operation.READ, ResourceType.TOPIC),
    "messages/rows": ("topic", Operation.READ, ResourceType.TOPIC),
    "producers": ("topic", Operation.READ, ResourceType.TOPIC),
    "transaction": ("id", Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID),
    "group": ("id", Operation.DESCRIBE, ResourceType.GROUP),
}
_CLUSTER_PAGES = {"broker": Operation.DESCRIBE_CONFIGS, "stats": Operation.DESCRIBE}


_PAGES: dict[str, Callable[[Any, Params], bytes]] = {
    "": topics.topics, "topics": topics.topics, "topic": topics.topic, "messages": messages.messages,
    "transactions": transactions.transactions, "transaction": transactions.transaction,
    "producers": producers.producers, "groups": groups.groups, "group": groups.group,
    "schemas": schemas.schemas, "subject": schemas.subject, "broker": broker_pages.broker_page,
}


class WebConsole:
    def __init__(self, broker: ConsoleBroker) -> None:
        self.broker = broker
        # The two static files, read once: they are part of the package (package-data).
        folder = resources.files(__package__) / "static"
        self._static = {name: (folder / name).read_bytes() for name in _STATIC_TYPES}

    def handle(self, request: Request) -> Response:
        path = request.path[len("/console"):].strip("/")
        try:
            if request.method == "GET":
                return self._get(path, Params(request.query), request)
            if path == "topics" and request.method == "POST":
                return self._create_topic(request.body, request)
            if path.startswith("topics/") and request.method == "DELETE":
                return self._delete_topic(path[len("topics/"):], request)
            return _json(405, {"error": f"{request.method} {request.path}"})
        except Refused as exc:
            status = 403
            if request.method == "GET" and not path.startswith(("messages/rows", "stats")):
                return status, HTML, error_page(status, str(exc))
            return _json(status, {"error": str(exc)})
        except NotFound as exc:  # or BadRequest
            return exc.status, HTML, error_page(exc.status, str(exc))
        except KafkaError as exc:  # a coordinator still loading its topic
            return 503, HTML, handle_kafka_error(exc)

    def _get(self, path: str, params: Params, request: Request) -> Response:
        if self.broker.services is None:
            return 503, HTML, error_page(503, "the broker is starting")
        check = _PAGE_CHECKS.get(path)
        if check is not None and params.text(check[0]):
            _require(request, check[1], check[2], params.text(check[0]))
        if path in _CLUSTER_PAGES:
            _require(request, _CLUSTER_PAGES[path], ResourceType.CLUSTER, CLUSTER_NAME)
        broker = self._seen_by(request)
        render = _PAGES.get(path)
        if render is not None:
            return 200, HTML, render(broker, params)
        if path == "messages/rows":
            rows, next_offset = messages.messages_rows(broker, params)
            return _json(200, {"rows": rows, "next": next_offset})
        if path == "stats":
            return _json(200, broker_pages.stats(broker))
        if path.startswith("static/") and path[len("static/"):] in self._static:
            name = path[len("static/"):]
            return 200, _STATIC_TYPES[name], self._static[name]
        return 404, HTML, error_page(404, f"no page {path!r}")

    def _seen_by(self, request: Request) -> Any:
        """The part of the broker the request's principal may see (all of it, to the
        operator and on a broker without security: `request.allows` says yes to them)."""
        return PrincipalView(self.broker, request.allows)

    # --- changes (past the admin endpoint's guard) -------------------------------------------

    def _create_topic(self, body: bytes, request: Request) -> Response:
        try:
            spec = json.loads(body or b"{}")
            if not isinstance(spec, dict):
                raise ValueError("a topic is a JSON object")
            name = spec.get("name")
            partitions = spec.get("partitions", 1)
            configs = spec.get("configs") or {}
            if not isinstance(name, str) or not name:
                raise ValueError("name: a topic name")
            if isinstance(partitions, bool) or not isinstance(partitions, int) \
                    or not 1 <= partitions <= MAX_PARTITIONS_PER_REQUEST:
                raise ValueError(f"partitions: 1 to {MAX_PARTITIONS_PER_REQUEST}")
            if not isinstance(configs, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                        for k, v in configs.items()):
                raise ValueError("configs: an object of strings")
            check_client_action(name, ClientAction.CREATE_TOPIC, self.broker.services.logs.internal_topics)
            if not (request.allows(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
                    or request.allows(Operation.CREATE, ResourceType.TOPIC, name)):
                raise Refused(f"{request.principal} may not create topic {name!r} (CREATE)")
            self.broker.services.create_topic(name, partitions, configs)
        except KafkaError as exc:
            return _json(400, {"error": f"{exc.code.name.upper()}: {exc.message}"})
        except ValueError as exc:
            return _json(400, {"error": str(exc)})
        return _json(201, {"created": name, "partitions": partitions})

    def _delete_topic(self, name: str, request: Request) -> Response:
        _require(request, Operation.DELETE, ResourceType.TOPIC, name)
        try:
            check_client_action(name, ClientAction.DELETE_TOPIC, self.broker.services.logs.internal_topics)
            self.broker.services.delete_topic(name)
        except KafkaError as exc:
            status = 404 if self.broker.services.logs.topic(name) is None else 400
            return _json(status, {"error": f"{exc.code.name.upper()}: {exc.message}"})
        return _json(200, {"deleted": name})


def _require(request: Request, operation: Operation, resource_type: ResourceType, name: str) -> None:
    if not request.allows(operation, resource_type, name):
        what = "the cluster" if resource_type == ResourceType.CLUSTER else f"{resource_type.name.lower()} {name!r}"
        raise Refused(f"{request.principal} may not {operation.name} {what}")


def _json(status: int, value: Any) -> Response:
    return status, JSON, (json.dumps(value) + "\n").encode()
