"""What a handler gets besides its request: the services, the header, and who asked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ottla.protocol.codec import RequestHeader, response_class
from ottla.protocol.entities import make

from ..services import Services


@dataclass(slots=True)
class RequestContext:
    services: Services
    header: RequestHeader
    # The client's address, for log lines and group member metadata.
    peer: str
    # The address of the listener the client connected to: what Metadata and
    # FindCoordinator tell it to connect to.
    advertised_address: tuple[str, int]
    # Work the handler leaves for after its response is on its way (see after_response).
    deferred: list[Callable[[], None]] | None = None

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def response_class(self) -> type:
        return response_class(self.header.api_key, self.header.api_version)

    def after_response(self, work: Callable[[], None]) -> None:
        """Run `work` right after the response is handed to the socket, before this
        connection's next request and before anything else on the event loop: the
        client is not kept waiting for it, and no one can see the state in between."""
        if self.deferred is None:
            self.deferred = []
        self.deferred.append(work)

    def respond(self, **values: Any) -> Any:
        """The response entity of the client's version, from version-agnostic values."""
        return make(self.response_class, **values)
