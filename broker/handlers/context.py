"""What a handler gets besides its request: the broker, the header, the connection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol.codec import RequestHeader, response_class
from protocol.entities import make

if TYPE_CHECKING:
    from ..connection import Connection
    from ..server import Broker


@dataclass(slots=True)
class RequestContext:
    broker: "Broker"
    header: RequestHeader
    connection: "Connection"

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def response_class(self) -> type:
        return response_class(self.header.api_key, self.header.api_version)

    def respond(self, **values: Any) -> Any:
        """The response entity of the client's version, from version-agnostic values."""
        return make(self.response_class, **values)
