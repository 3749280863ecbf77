"""The request memory pool and a connection's intake, without sockets (issue 40): what a
connection counts is what it received, and with the pool full the requests begun are
read on one at a time, never all together."""

from __future__ import annotations

import ctypes.util
import platform
import struct

from ottla.broker.network import request_memory
from ottla.broker.network.frame_intake import FrameIntake
from ottla.broker.network.request_memory import RequestMemory


class Transport:
    """What FrameIntake asks of an asyncio transport: to pause and resume reading."""

    def __init__(self) -> None:
        self.reading = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


def _intake(memory: RequestMemory) -> tuple[FrameIntake, Transport]:
    transport = Transport()
    intake = FrameIntake(100 << 20, memory, lambda backlog: feed(intake, backlog))
    intake.transport = transport  # type: ignore[assignment]
    return intake, transport


def feed(intake: FrameIntake, data: bytes) -> list[memoryview]:
    """What Connection._take does with the bytes read (no request served here)."""
    frames = intake.split(data)
    intake.queue(frames)
    intake.settle(bool(frames))
    return frames


def test_an_announced_frame_counts_what_arrived_of_it():
    memory = RequestMemory(256 << 20)
    for _ in range(3):
        intake, transport = _intake(memory)
        feed(intake, struct.pack(">i", 100 << 20) + b"\0")
        assert transport.reading
    assert memory.used == 3  # before: 300 MiB, the pool exhausted by twelve bytes


def test_with_the_pool_full_requests_begun_are_finished_one_at_a_time():
    """Requests past the 64 KiB that may always be read; a pool of 100 KB."""
    memory = RequestMemory(100_000)
    a, a_transport = _intake(memory)
    b, b_transport = _intake(memory)
    feed(a, struct.pack(">i", 200_000) + b"a" * 60_000)
    feed(b, struct.pack(">i", 200_000) + b"b" * 60_000)  # the pool is full: b finishes its request
    assert memory.full and b_transport.reading
    feed(a, b"a" * 10_000)  # a waits for b's
    assert not a_transport.reading
    assert [bytes(f) for f in feed(b, b"b" * 140_000)] == [b"b" * 200_000]
    assert a_transport.reading  # b's is whole: a may finish its own now
    assert [bytes(f) for f in feed(a, b"a" * 130_000)] == [b"a" * 200_000]
    # Nothing new starts with the pool full: b's next request waits unread until it has
    # room; a request of at most 64 KiB on a connection holding nothing is read.
    assert a_transport.reading and b_transport.reading
    feed(b, struct.pack(">i", 200_000) + b"b")
    assert not b_transport.reading and b.reader.backlog
    a.next_frame()
    a.served()
    assert [bytes(f) for f in feed(a, struct.pack(">i", 3) + b"abc")] == [b"abc"] and a_transport.reading
    b.next_frame()
    b.served()  # the pool has room again: b reads its next request
    assert b_transport.reading and not b.reader.backlog and b.reader.receiving == 200_000


def test_before_authentication_nothing_counts_in_the_pool():
    memory = RequestMemory(4 << 20)
    intakes = []
    for _ in range(9):
        intake, transport = _intake(memory)
        intake.bound_frames(512 * 1024)
        feed(intake, struct.pack(">i", 512 * 1024) + b"\0" * (500 * 1024))
        intakes.append(intake)
    assert memory.used == 0 and not memory.full
    intakes[0].bound_frames(None)  # authenticated: what it holds counts from now on
    feed(intakes[0], b"\0" * 1024)
    assert memory.used == 501 * 1024


def test_glibcs_allocator_functions_are_found_without_running_ldconfig(monkeypatch):
    """ctypes.util.find_library("c") runs `ldconfig -p` in a subprocess (11-130 ms of
    wall clock at each start on a loaded machine, twice): the C library's functions are
    looked up among the symbols the process has loaded already."""
    def no_subprocess(name: str) -> None:
        raise AssertionError(f"find_library({name!r}) runs ldconfig")

    monkeypatch.setattr(ctypes.util, "find_library", no_subprocess)
    if platform.libc_ver()[0] == "glibc":
        assert request_memory.settle_allocator()
        assert request_memory._malloc_trim() is not None
