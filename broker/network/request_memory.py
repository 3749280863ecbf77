"""The memory held by requests read and not yet served, across every connection: Kafka's
`queued.max.request.bytes`.

A connection accounts here each request it has queued and the part of a request it is
still receiving. While the total is over the limit, a connection that holds any such
bytes stops reading from its socket (the client's sends back up in TCP, as with a
Kafka broker whose memory pool is exhausted) and is resumed as soon as requests served
anywhere bring the total back under the limit. A request already begun may finish
(pausing it halfway would hold its bytes with nothing to release them), and a
connection that holds nothing may still read a request: clients that queue large
requests and never let them be served hold the broker to about the limit, plus one
request per connection, and never starve the others.
"""

from __future__ import annotations

from typing import Protocol


class Pausable(Protocol):
    def resume_if_room(self) -> None: ...


class RequestMemory:
    def __init__(self, limit: int) -> None:
        self.limit = limit  # bytes; <= 0: no limit (Kafka's -1)
        self.used = 0
        self._paused: set[Pausable] = set()

    @property
    def full(self) -> bool:
        return 0 < self.limit <= self.used

    def adjust(self, delta: int) -> None:
        self.used += delta
        if delta < 0 and self._paused and not self.full:
            for connection in list(self._paused):
                connection.resume_if_room()

    def pause(self, connection: Pausable) -> None:
        self._paused.add(connection)

    def forget(self, connection: Pausable) -> None:
        self._paused.discard(connection)
