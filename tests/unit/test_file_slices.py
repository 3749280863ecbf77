"""Fetch's records left in their files (storage/file_slice.py), without a broker: a read
in place finds the same batches as a read into memory, and a slice whose file was
truncated under it is never sent as something else (broker/network/file_sender.py)."""

from __future__ import annotations

import asyncio
import errno
import os
import socket

from ottla.broker.network.file_sender import FileSender
from ottla.protocol.batch import BatchHeader, build_batch, encode_record
from ottla.storage import file_slice
from ottla.storage.file_slice import FileSlice
from ottla.storage.log import PartitionLog
from ottla.storage.log_config import LogConfig


def _expected(log: PartitionLog, start: int, max_bytes: int, min_one: bool) -> bytes:
    """Kafka's rule, from the batches one by one: whole batches from the one holding
    `start`, within `max_bytes`, or the first alone when it is larger and `min_one`."""
    taken = b""
    for _, data in log.batches(start):
        if len(taken) + len(data) > max_bytes and not (min_one and not taken):
            break
        taken += data
    return taken


def test_reads_in_place_and_into_memory_find_the_batches_kafkas_rule_gives(tmp_path):
    log = PartitionLog.create(str(tmp_path / "p-0"), "p", 0, LogConfig(segment_bytes=8 << 20))
    offset = 0
    # Batches from 100 bytes to 300 KB (3 MB in all, one segment), so that walk windows
    # (64 KiB) end inside headers, inside batches and on their boundaries.
    for i, (count, size) in enumerate([(3, 50), (1, 300_000), (40, 1_000), (2, 70_000), (200, 100)] * 6):
        data = build_batch([encode_record(None, bytes([i]) * size, offset_delta=j) for j in range(count)],
                           timestamp=1_000 + i)
        log.append_batch(data, BatchHeader.parse(data))
        offset += count
    assert len(log.segments) == 1
    slices = 0
    for start in range(0, offset, 37):
        for max_bytes in (50, 70_000, 100_000, 400_000, 1 << 20, 64 << 20):
            for min_one in (True, False):
                expected = _expected(log, start, max_bytes, min_one)
                copied = log.read(start, max_bytes, False, min_one).records
                in_place = log.read(start, max_bytes, False, min_one, in_place=True).records
                if isinstance(in_place, FileSlice):
                    slices += 1
                    in_place = in_place.read()
                assert (copied or b"") == expected, ("into memory", start, max_bytes, min_one)
                assert (in_place or b"") == expected, ("in place", start, max_bytes, min_one)
    assert slices > 100  # most reads were in place


def test_a_slice_cut_short_by_a_truncation_ends_the_connection_and_sends_nothing_else(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    content = os.urandom(4 << 20)
    path.write_bytes(content)
    fd = os.open(path, os.O_RDWR)
    piece = FileSlice(fd, 0, len(content))
    os.ftruncate(fd, 1 << 20)  # what compaction or recovery could do under a slice
    os.close(fd)
    failures: list[str] = []
    received = bytearray()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        theirs.setblocking(False)
        transport, _ = await loop.create_connection(asyncio.Protocol, sock=ours)
        sender = FileSender(transport, lambda: None, failures.append)
        sender.send([b"head", piece, b"tail"])
        while sender.busy:
            try:
                received.extend(await asyncio.wait_for(loop.sock_recv(theirs, 1 << 16), 30))
            except ConnectionError:
                break
        transport.abort()
        theirs.close()

    asyncio.run(asyncio.wait_for(main(), 60))
    assert failures and "cut short" in failures[0]
    assert bytes(received) == b"head" + content[:len(received) - 4], "bytes the file never held were sent"
    assert piece.fd == -1  # the slice's descriptor is closed


def test_a_read_in_place_with_no_descriptor_left_is_read_into_memory(tmp_path, monkeypatch):
    """Each slice holds a descriptor until its answer is sent: with none left (EMFILE),
    the read is served from memory rather than failing the fetch."""
    log = PartitionLog.create(str(tmp_path / "p-0"), "p", 0, LogConfig(segment_bytes=8 << 20))
    for i in range(4):
        data = build_batch([encode_record(None, bytes([i]) * 100_000)], timestamp=1_000 + i)
        log.append_batch(data, BatchHeader.parse(data))
    assert isinstance(log.read(0, 1 << 20, False, True, in_place=True).records, FileSlice)

    def no_descriptor_left(fd: int) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(file_slice.os, "dup", no_descriptor_left)
    records = log.read(0, 1 << 20, False, True, in_place=True).records
    assert records == _expected(log, 0, 1 << 20, True)


def test_slices_past_the_process_budget_are_read_into_memory(tmp_path, monkeypatch):
    """A client listing one large partition many times and never reading its answers
    holds a descriptor per slice: past the budget, ranges come back as bytes."""
    log = PartitionLog.create(str(tmp_path / "p-0"), "p", 0, LogConfig(segment_bytes=8 << 20))
    data = build_batch([encode_record(None, b"x" * 100_000)], timestamp=1_000)
    log.append_batch(data, BatchHeader.parse(data))
    monkeypatch.setattr(FileSlice, "limit", FileSlice.live + 3)
    held = [log.read(0, 1 << 20, False, True, in_place=True).records for _ in range(5)]
    assert [isinstance(r, FileSlice) for r in held] == [True, True, True, False, False]
    assert all(bytes(r) == data for r in held)  # type: ignore[arg-type]
    before = FileSlice.live
    for r in held:
        if isinstance(r, FileSlice):
            r.close()
    assert FileSlice.live == before - 3
