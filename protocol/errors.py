"""One exception type that carries a Kafka error code.

Storage and the coordinators raise `KafkaError(ErrorCode.x, "why")`; the handler that
called them turns it into the error field of its response. Error codes themselves are
kio's `ErrorCode` enum, re-exported here so nobody imports kio just for them.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ("ErrorCode", "KafkaError")


class KafkaError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"KafkaError({self.code.name}, {self.message!r})"
