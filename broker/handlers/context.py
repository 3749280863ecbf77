"""What a handler gets besides its request: the services, the header, and who asked."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ottla.protocol.codec import RequestHeader, response_class
from ottla.protocol.entities import builder
from ottla.protocol.errors import ErrorCode

from ..security.authorizer import CLUSTER_NAME, Operation, ResourceType
from ..security.sasl import Session
from ..services import Services

ResponseT = TypeVar("ResponseT")


class Built(Generic[ResponseT]):
    """The response entity built from a response view's values (`RequestContext.entity`),
    for a handler that answers with an entity it built ahead (ApiVersions builds each
    version's answer once). Typing only: the value is the kio entity itself."""


@dataclass(slots=True)
class RequestContext:
    services: Services
    header: RequestHeader
    # The client's address, for log lines and group member metadata.
    peer: str
    # The address of the listener the client connected to: what Metadata and
    # FindCoordinator tell it to connect to.
    advertised_address: tuple[str, int]
    # Who the client is and where its SASL exchange stands (broker/security/sasl.py).
    session: Session
    # Work the handler leaves for after its response is on its way (see after_response).
    deferred: list[Callable[[], None]] | None = None
    # How long a quota throttles the client after this response (client_quotas.py):
    # the response says so in throttle_time_ms, and the connection waits that long.
    throttle_ms: int = 0

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def response_class(self) -> type:
        cls = response_class(self.header.api_key, self.header.api_version)
        if cls is None:  # the request was read with this version's schema, so it has one
            raise LookupError(f"no response schema for API {self.header.api_key} v{self.header.api_version}")
        return cls

    def after_response(self, work: Callable[[], None]) -> None:
        """Run `work` right after the response is handed to the socket, before this
        connection's next request and before anything else on the event loop: the
        client is not kept waiting for it, and no one can see the state in between."""
        if self.deferred is None:
            self.deferred = []
        self.deferred.append(work)

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Whether the client's principal may do `operation` on the resource (always,
        when no authorizer is configured)."""
        authorizer = self.services.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(self.session.principal, self.host, operation, resource_type, name)

    def membership_refused(self, group_id: str, topic_names: Iterable[str] | None) -> ErrorCode | None:
        """A KIP-848 or share group heartbeat's ACL check, as Kafka's: READ on the group,
        then DESCRIBE on every topic it names; the error code of the first refused."""
        if not self.allowed(Operation.READ, ResourceType.GROUP, group_id):
            return ErrorCode.group_authorization_failed
        if topic_names is not None and not all(
                self.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name) for name in topic_names):
            return ErrorCode.topic_authorization_failed
        return None

    def allowed_on_cluster(self, operation: Operation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    @property
    def host(self) -> str:
        """The client's address without the port, as ACLs name hosts."""
        return self.peer.rsplit(":", 1)[0]

    def entity(self, values: ResponseT) -> Built[ResponseT]:
        """The response entity of the client's version, from the version-agnostic values
        a handler answers with (its API's response view, protocol/views)."""
        # Typed through the annotation, not typing.cast: no call on every response's path.
        build: Callable[[Any], Built[ResponseT]] = self._builder()
        return build(values)

    def _builder(self) -> Callable[[dict[str, Any]], Any]:
        """The builder of the client's version's response class: one look-up per response."""
        header = self.header
        build = _builders.get((header.api_key, header.api_version))
        if build is None:
            build = _builders[header.api_key, header.api_version] = builder(self.response_class)
        return build


# (api key, version) -> the builder of its response class.
_builders: dict[tuple[int, int], Callable[[dict[str, Any]], Any]] = {}
