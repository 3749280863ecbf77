"""The memory held by requests, being read or queued, across every connection: one pool
bounded by `queued.max.request.bytes`, as Kafka's MemoryPool bounds its receives.

A connection counts here each request it has queued and each it is receiving, the
latter whole from its size prefix on (Kafka allocates the receive's buffer then). While
the pool is exhausted no connection starts reading a new request: the size prefix and
what follows wait unread (the connection stops reading its socket, the client's sends
back up in TCP) until requests served anywhere bring the pool under its bound. As in
Kafka's non-strict pool, one request may take it past the bound, so the most the broker
holds is the bound plus one request per connection that was mid-request.

One exception keeps the broker answering while big requests wait: a connection that
holds nothing in the pool may still read a request of at most 64 KiB (Metadata,
heartbeats, commits, small produces), so clients that fill the pool with requests they
never let be served cannot stop everyone else.

When a burst is over (the pool back at zero after holding tens of MiB) the C allocator
is asked to give its free pages back to the operating system (glibc's malloc_trim):
large frames are freed to it in pieces it would otherwise keep.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
from typing import Callable, Protocol

# A request this small may be read with the pool exhausted, by a connection holding nothing.
SMALL_REQUEST_BYTES = 64 * 1024
# Give memory back after a burst that held at least this much.
_TRIM_AFTER_BYTES = 32 * 1024 * 1024
# How long after the pool empties: the last requests read are still being served.
_TRIM_DELAY_S = 1.0


class Pausable(Protocol):
    def resume_if_room(self) -> None: ...


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's malloc_trim(0), or None where there is none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


class RequestMemory:
    def __init__(self, limit: int) -> None:
        self.limit = limit  # bytes; <= 0: no limit (Kafka's -1)
        self.used = 0
        self._paused: set[Pausable] = set()
        self._peak = 0  # the most used since memory was last given back
        self._trim = _malloc_trim()
        self._trim_pending = False

    @property
    def full(self) -> bool:
        return 0 < self.limit <= self.used

    def may_start(self, size: int, held: int) -> bool:
        """Whether a connection holding `held` bytes here may start reading a request
        of `size` bytes."""
        return not self.full or (held == 0 and size <= SMALL_REQUEST_BYTES)

    def adjust(self, delta: int) -> None:
        self.used += delta
        if delta > 0:
            self._peak = max(self._peak, self.used)
            return
        if self._paused and not self.full:
            for connection in list(self._paused):
                connection.resume_if_room()
        if self.used == 0 and self._peak >= _TRIM_AFTER_BYTES and self._trim is not None and not self._trim_pending:
            self._trim_pending = True
            asyncio.get_running_loop().call_later(_TRIM_DELAY_S, self._give_back)

    def _give_back(self) -> None:
        self._trim_pending = False
        if self.used == 0 and self._trim is not None:
            self._peak = 0
            self._trim()

    def pause(self, connection: Pausable) -> None:
        self._paused.add(connection)

    def forget(self, connection: Pausable) -> None:
        self._paused.discard(connection)
