"""The memory held by requests, being read or queued, across every connection: one pool
bounded by `queued.max.request.bytes`, as Kafka's MemoryPool bounds its receives.

A connection counts here the bytes it has received of each request, from the first
until the request is served: what it holds, never what a size prefix promises (a prefix
costs a client four bytes; counting it whole let three sockets announcing 100 MiB each
take the whole pool with a byte apiece, issue 40). While the pool is exhausted no
connection starts reading a new request: the size prefix and what follows wait unread
(the connection stops reading its socket, the client's sends back up in TCP) until
requests served anywhere bring the pool under its bound. Requests already begun are read
on one at a time: the connection that first finds the pool full mid-request finishes
its request (so it can be served and let go of), the others mid-request pause until it
has. As in Kafka's non-strict pool, the most the broker holds is then the bound plus
one request, plus a read's worth per connection.

One exception keeps the broker answering while big requests wait: a connection that
holds nothing in the pool may still read a request of at most 64 KiB (Metadata,
heartbeats, commits, small produces), so clients that fill the pool with requests they
never let be served cannot stop everyone else.

A client that stops sending halfway through a request holds what it sent until
connections.max.idle.ms closes it, as Kafka closes a connection by its last I/O.

When a burst is over (the pool down to a quarter of the tens of MiB it held) the C allocator
is asked to give its free pages back to the operating system (glibc's malloc_trim):
large frames are freed to it in pieces it would otherwise keep.
"""

from __future__ import annotations

import asyncio
import ctypes
from collections.abc import Callable
from typing import Any, Protocol

# A request this small may be read with the pool exhausted, by a connection holding nothing.
SMALL_REQUEST_BYTES = 64 * 1024
# Give memory back after a burst that held at least this much.
_TRIM_AFTER_BYTES = 32 * 1024 * 1024
# How long after the pool empties: the last requests read are still being served.
_TRIM_DELAY_S = 1.0


class Pausable(Protocol):
    def resume_if_room(self) -> None: ...


# glibc's mallopt parameters (malloc.h) and the values the broker sets (settle_allocator).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024  # glibc's largest
_TRIM_THRESHOLD_BYTES = 4 * 1024 * 1024


def _glibc_function(name: str) -> Any | None:
    """A function of glibc's, or None where there is none (musl, macOS).

    Looked up among the symbols the process has loaded already (dlopen(NULL)): the C
    library is one of them. ctypes.util.find_library("c") runs `ldconfig -p` in a
    subprocess to find it, about 0.2 s of every start on a loaded machine."""
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's malloc_trim(0), or None where there is none."""
    trim = _glibc_function("malloc_trim")
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


def settle_allocator() -> bool:
    """Fix glibc's thresholds for handing memory to and from the kernel, once, at the
    broker's start; False where there is no glibc.

    By default glibc adjusts them as the program runs: a large block (a produced
    frame of a MiB, the records copied out of it) is mmapped fresh, or the heap's top
    is given back as soon as it is freed, so the next request of the same size faults
    its pages in again. On a stream of 1 KiB records in 1 MiB batches that was two
    page faults per 4 KiB received and two thirds of the broker's CPU. Fixed
    thresholds keep freed blocks in the heap for the next request; malloc_trim, after a
    burst (RequestMemory), still gives the memory back."""
    mallopt = _glibc_function("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD_BYTES))


class RequestMemory:
    # Slots: _pipeline.c's take reads limit and used at their offsets (compiled_pipeline.TAKE_SLOTS).
    __slots__ = ("limit", "used", "_paused", "_finishing", "_peak", "_trim", "_trim_pending")

    def __init__(self, limit: int) -> None:
        self.limit = limit  # bytes; <= 0: no limit (Kafka's -1)
        self.used = 0
        self._paused: set[Pausable] = set()
        # The connection reading on a request begun while the pool is full (may_finish).
        self._finishing: Pausable | None = None
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

    def may_finish(self, connection: Pausable, receiving: int) -> bool:
        """Whether a connection in the middle of a request of `receiving` bytes may read
        on: always while the pool has room; with it full, a small request, or the one
        large request being finished. With none begun (0), `may_start` decides at the
        next size prefix."""
        if not self.full or receiving <= SMALL_REQUEST_BYTES:
            return True
        if self._finishing is None:
            self._finishing = connection
        return self._finishing is connection

    def finished(self, connection: Pausable) -> None:
        """`connection` has no request begun: if it was the one finishing, the next may."""
        if self._finishing is connection:
            self._finishing = None
            self._resume_paused()

    def adjust(self, delta: int) -> None:
        self.used += delta
        if delta > 0:
            self._peak = max(self._peak, self.used)
            return
        if not self.full:
            self._resume_paused()
        if self._after_burst() and self._trim is not None and not self._trim_pending:
            self._trim_pending = True
            asyncio.get_running_loop().call_later(_TRIM_DELAY_S, self._give_back)

    def _after_burst(self) -> bool:
        """The pool held tens of MiB and is down to a quarter of that or less (not
        necessarily zero: a client that vanished behind unread bytes keeps its
        connection, and what it holds, until the connection is closed as idle)."""
        return self._peak >= _TRIM_AFTER_BYTES and self.used <= self._peak // 4

    def _give_back(self) -> None:
        self._trim_pending = False
        if self._after_burst() and self._trim is not None:
            self._peak = 0
            self._trim()

    def _resume_paused(self) -> None:
        for connection in list(self._paused):
            connection.resume_if_room()

    def pause(self, connection: Pausable) -> None:
        self._paused.add(connection)

    def unpause(self, connection: Pausable) -> None:
        self._paused.discard(connection)

    def forget(self, connection: Pausable) -> None:
        """`connection` is gone."""
        self._paused.discard(connection)
        self.finished(connection)
