"""The producers of bench/many_clients.py: raw sockets driven by asyncio (uvloop), built
from the project's own codecs, in client processes (`client_process`), each holding a
share of the connections. Each connection is one idempotent producer writing to one
partition, one Produce at a time; the request is precomputed once and only the sequence
and the CRC are patched per batch, so a connection costs the client one send, one
receive and a response decode per batch."""

from __future__ import annotations

import asyncio
import multiprocessing
import struct
import time
from dataclasses import dataclass, field
from typing import Any

import crc32c
import uvloop

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.codec import decode_response, encode_request
from tests.wire import request

# How long a client process may take to connect, or to report after its window.
CLIENT_TIMEOUT = 180.0
PRODUCE, INIT_PRODUCER_ID = 0, 22
PRODUCE_VERSION = 9

# Offsets in a v2 batch (see protocol.batch): the CRC covers everything from the attributes on.
_CRC_AT, _ATTRIBUTES_AT, _SEQUENCE_AT = 17, 21, 53
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


class _Connection(asyncio.Protocol):
    """One idempotent producer on one connection: InitProducerId, then Produce after
    Produce to its partition, each sent when the previous one is acknowledged."""

    def __init__(self, shared: _ClientShared, topic: str, partition: int) -> None:
        self.shared = shared
        self.topic = topic
        self.partition = partition
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[bytes] | None = None
        self.frame = bytearray()  # the Produce request, patched per batch
        self.batch_at = self.batch_end = 0  # where its batch is
        self.sequence = 0
        self.sent_at = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        lost = ConnectionError(f"the broker closed the connection ({exc})")
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(lost)
        self.shared.fail(str(lost))  # nothing once the run is done (the client closes then)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= 4:
            size = _INT32.unpack_from(self.buffer)[0]
            if len(self.buffer) < 4 + size:
                return
            frame = bytes(self.buffer[4:4 + size])
            del self.buffer[:4 + size]
            if self.waiter is not None:
                waiter, self.waiter = self.waiter, None
                waiter.set_result(frame)
            else:
                self.acknowledged(frame)

    async def call(self, entity: Any) -> Any:
        """One request and its response, before the clock (set-up)."""
        self.waiter = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        self.transport.write(encode_request(1, "many-clients", entity))
        frame = await self.waiter
        return decode_response(type(entity).__api_key__, type(entity).__version__, frame)[1]

    async def set_up(self) -> None:
        for _ in range(600):
            init = await self.call(request(INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout=60000,
                                           producer_id=-1, producer_epoch=-1))
            # Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its producer id manager has a
            # block of ids, just after it starts: retried, as clients do.
            if init.error_code not in (14, 15):
                break
            await asyncio.sleep(0.1)
        if init.error_code != 0:
            raise RuntimeError(f"InitProducerId: {init.error_code}")
        value = bytes(self.shared.size)
        batch = build_batch([encode_record(None, value, offset_delta=i) for i in range(self.shared.batch)],
                            timestamp=int(time.time() * 1000), producer_id=init.producer_id,
                            producer_epoch=init.producer_epoch, base_sequence=0)
        self.frame = bytearray(encode_request(2, "many-clients", request(
            PRODUCE, PRODUCE_VERSION, transactional_id=None, acks=-1, timeout=30000,
            topic_data=[{"name": self.topic, "partition_data": [{"index": self.partition, "records": batch}]}])))
        self.batch_at = self.frame.find(batch)
        self.batch_end = self.batch_at + len(batch)
        assert self.batch_at > 0 and self.frame.find(batch, self.batch_at + 1) < 0

    def send(self) -> None:
        """The next batch: the template with this batch's sequence and CRC."""
        at = self.batch_at
        _INT32.pack_into(self.frame, at + _SEQUENCE_AT, self.sequence)
        crc = crc32c.crc32c(memoryview(self.frame)[at + _ATTRIBUTES_AT:self.batch_end])
        _UINT32.pack_into(self.frame, at + _CRC_AT, crc)
        self.sent_at = time.monotonic()
        assert self.transport is not None
        self.transport.write(bytes(self.frame))

    def acknowledged(self, frame: bytes) -> None:
        shared = self.shared
        answer = decode_response(PRODUCE, PRODUCE_VERSION, frame)[1].responses[0].partition_responses[0]
        now = time.monotonic()
        if answer.error_code != 0:
            shared.fail(f"partition {self.partition}: Produce answered error {answer.error_code} "
                        f"({answer.error_message})")
            return
        self.sequence += shared.batch
        if shared.window_start <= now <= shared.window_end:
            shared.records += shared.batch
            shared.latencies.append(now - self.sent_at)
        if now < shared.window_end:
            self.send()
        else:
            shared.finished += 1
            if shared.finished == shared.connections and not shared.done.done():
                shared.done.set_result(None)


@dataclass
class _ClientShared:
    connections: int
    batch: int
    size: int
    window_start: float = float("inf")
    window_end: float = float("inf")
    records: int = 0
    finished: int = 0
    latencies: list[float] = field(default_factory=list)
    done: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def fail(self, reason: str) -> None:
        if not self.done.done():
            self.done.set_exception(RuntimeError(reason))


async def _client_main(bootstrap: str, topic: str, partitions: list[int], batch: int, size: int, warmup: float,
                       duration: float, events: multiprocessing.Queue, go: Any, start_at: Any) -> None:
    loop = asyncio.get_running_loop()
    host, port = bootstrap.rsplit(":", 1)
    shared = _ClientShared(len(partitions), batch, size)
    limit = asyncio.Semaphore(50)  # connects at a time: a burst of 1,000 SYNs is not what is measured

    async def open_one(partition: int) -> _Connection:
        async with limit:
            _, connection = await loop.create_connection(lambda: _Connection(shared, topic, partition), host, int(port))
            await connection.set_up()
            return connection

    connections = await asyncio.gather(*(open_one(p) for p in partitions))
    events.put(("ready", len(connections)))
    if not await loop.run_in_executor(None, go.wait, CLIENT_TIMEOUT):
        raise TimeoutError("never released")
    started = start_at.value
    shared.window_start, shared.window_end = started + warmup, started + warmup + duration
    cpu: list[float] = []  # this process's CPU time at the window's start and end
    for edge in (shared.window_start, shared.window_end):
        loop.call_at(loop.time() + edge - time.monotonic(), lambda: cpu.append(time.process_time()))
    for connection in connections:
        connection.send()
    await asyncio.wait_for(shared.done, warmup + duration + 60)
    for connection in connections:
        assert connection.transport is not None
        connection.transport.close()
    latencies = sorted(shared.latencies) or [0.0]
    events.put(("done", (shared.records, latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)],
                         cpu[1] - cpu[0])))


def client_process(bootstrap: str, topic: str, partitions: list[int], batch: int, size: int, warmup: float,
                    duration: float, events: multiprocessing.Queue, go: Any, start_at: Any) -> None:
    try:
        uvloop.run(_client_main(bootstrap, topic, partitions, batch, size, warmup, duration, events, go, start_at))
    except Exception as exc:
        events.put(("failed", f"{type(exc).__name__}: {exc}"))
