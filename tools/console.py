"""`ottla produce` and `ottla consume`: Kafka's console producer and consumer, over the
wire protocol against any broker address.

    ottla produce --topic T [--partition P] [--parse-key] [--key-separator S] [--header K=V ...]
        one record per line of standard input
    ottla consume --topic T [--partition P] [--from-beginning | --offset N]
                  [--isolation-level read_committed|read_uncommitted]
                  [--max-messages N] [--timeout-ms MS]
        one line per record: headers, key and value, tab-separated, as
        kafka-console-consumer prints them with print.headers and print.key

The producer writes record batches with protocol.batch (uncompressed, acks=all, one
batch per partition per request). The consumer reads Fetch responses with
protocol.batch.iter_records; under read_committed (the default: what a transactional
pipeline's downstream sees) it skips control batches and the batches of aborted
transactions, using the aborted-transaction list each Fetch answer carries, as the
Java consumer does.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO

from ottla.protocol import apis
from ottla.protocol.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Record,
    build_batch,
    encode_record,
    iter_records,
)
from ottla.protocol.control import ControlType, parse_marker

from .admin_cli import DEFAULT_BOOTSTRAP, run_tool
from .client import REQUEST_TIMEOUT_MS, ClientError, Cluster, check
from .progress import Progress, regular_file_size

# Records per batch: enough to make a pipe of lines fast, small enough to stay far below
# max.message.bytes for lines of ordinary length.
_BATCH_RECORDS = 500
_EARLIEST, _LATEST = -2, -1
_FETCH_MAX_WAIT_MS = 500


def add_parsers(sub: argparse._SubParsersAction) -> None:
    produce = sub.add_parser("produce", help="write standard input's lines as records (kafka-console-producer)")
    _common(produce, _produce)
    produce.add_argument("--parse-key", action="store_true", help="each line is KEY<separator>VALUE")
    produce.add_argument("--key-separator", default="\t", help="between key and value (default: tab)")
    produce.add_argument("--header", action="append", default=[], metavar="KEY=VALUE",
                         help="a header added to every record")

    consume = sub.add_parser("consume", help="print records with their key and headers (kafka-console-consumer)")
    _common(consume, _consume)
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    start.add_argument("--offset", type=int, help="start at this offset (with --partition)")
    consume.add_argument("--isolation-level", default="read_committed",
                         choices=["read_committed", "read_uncommitted"])
    consume.add_argument("--max-messages", type=int, help="exit after this many records")
    consume.add_argument("--timeout-ms", type=int, help="exit when no record came for this long")


def _common(parser: argparse.ArgumentParser, run: Callable[[Cluster, argparse.Namespace], None]) -> None:
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                        help="a broker to start from (default %(default)s)")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties: security.protocol, sasl.*, ssl.* (a secured broker)")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, help="one partition (default: by key, as Kafka's partitioner)")
    parser.set_defaults(run=lambda args: run_tool(args, run), action="")


# --- produce ----------------------------------------------------------------------------


def murmur2(data: bytes) -> int:
    """Kafka's default partitioner hash (Utils.murmur2), so a key lands where Java and
    librdkafka's murmur2_random put it."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


@dataclass(frozen=True, slots=True)
class Line:
    key: bytes | None
    value: bytes


def _parse_lines(stream: Iterable[bytes], parse_key: bool, separator: bytes) -> Iterator[Line]:
    for raw in stream:
        line = raw.rstrip(b"\r\n")
        if parse_key:
            key, sep, value = line.partition(separator)
            if not sep:
                raise ClientError(f"no key separator in line {line[:60]!r}")
            yield Line(key, value)
        else:
            yield Line(None, line)


def _produce(cluster: Cluster, args: argparse.Namespace) -> None:
    # A producer's metadata request may create the topic, as Kafka's console producer's does.
    partitions = sorted(cluster.partitions(args.topic, allow_create=True))
    headers = []
    for item in args.header:
        key, sep, value = item.partition("=")
        if not sep:
            raise ClientError(f"--header expects KEY=VALUE, got {item!r}")
        headers.append((key, value.encode()))
    # Records without a key stick to one partition for the whole run, as the sticky
    # partitioner keeps them together batch after batch.
    sticky = random.choice(partitions)
    pending: dict[int, list[Line]] = {}
    count = 0
    # Progress by bytes of input: of the file's size when standard input is one.
    progress = Progress(f"producing to {args.topic}", regular_file_size(sys.stdin.buffer), "bytes")
    read = [0]
    for line in _parse_lines(_counted(sys.stdin.buffer, read), args.parse_key, args.key_separator.encode()):
        if args.partition is not None:
            partition = args.partition
        elif line.key is not None:
            partition = partitions[(murmur2(line.key) & 0x7FFFFFFF) % len(partitions)]
        else:
            partition = sticky
        pending.setdefault(partition, []).append(line)
        count += 1
        if len(pending[partition]) >= _BATCH_RECORDS:
            _send(cluster, args.topic, partition, pending.pop(partition), headers)
            progress.update(read[0], f"{count:,} records")
    for partition, lines in pending.items():
        _send(cluster, args.topic, partition, lines, headers)
    progress.close()
    print(f"Produced {count} record(s) to {args.topic}.", file=sys.stderr)


def _counted(stream: IO[bytes], read: list[int]) -> Iterator[bytes]:
    for raw in stream:
        read[0] += len(raw)
        yield raw


def _send(cluster: Cluster, topic: str, partition: int, lines: list[Line], headers: list) -> None:
    timestamp = int(time.time() * 1000)
    records = [encode_record(line.key, line.value, offset_delta=i, headers=headers) for i, line in enumerate(lines)]
    batch = build_batch(records, timestamp=timestamp)
    answer = cluster.leader(topic, partition).call(
        apis.PRODUCE, transactional_id=None, acks=-1, timeout=REQUEST_TIMEOUT_MS,
        topic_data=[{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    )
    for t in answer.responses:
        for p in t.partition_responses:
            check(p.error_code, f"Produce to {topic}-{partition}", getattr(p, "error_message", None))


# --- consume ----------------------------------------------------------------------------


def _consume(cluster: Cluster, args: argparse.Namespace) -> None:
    read_committed = args.isolation_level == "read_committed"
    partitions = [args.partition] if args.partition is not None else sorted(cluster.partitions(args.topic))
    if args.offset is not None:
        if args.partition is None:
            raise ClientError("--offset needs --partition")
        positions = {args.partition: args.offset}
    else:
        start = _EARLIEST if args.from_beginning else _LATEST
        positions = cluster.list_offsets(args.topic, partitions, start, read_committed)
    printed = 0
    last_record = time.monotonic()
    out = sys.stdout.buffer
    progress = Progress(f"consuming {args.topic}", data_on_stdout=True)
    if progress.enabled:
        # Of how many: the records up to today's end (asked only for a person watching).
        ends = cluster.list_offsets(args.topic, partitions, _LATEST, read_committed)
        total = sum(max(0, ends[p] - positions[p]) for p in partitions)
        progress.total = min(total, args.max_messages) if args.max_messages is not None else total
    while args.max_messages is None or printed < args.max_messages:
        got = 0
        for partition in partitions:
            for record in _fetch(cluster, args.topic, partition, positions, read_committed):
                out.write(format_record(record) + b"\n")
                printed += 1
                got += 1
                if args.max_messages is not None and printed >= args.max_messages:
                    break
            if args.max_messages is not None and printed >= args.max_messages:
                break
        out.flush()
        progress.update(printed)
        if got:
            last_record = time.monotonic()
        elif args.timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= args.timeout_ms:
            break
    progress.close()
    print(f"Processed a total of {printed} messages", file=sys.stderr)


def format_record(record: Record) -> bytes:
    """headers<TAB>key<TAB>value, as kafka-console-consumer prints with print.headers
    and print.key: `NO_HEADERS` when there are none, `null` for a missing key or value."""
    headers = b",".join(name.encode() + b":" + (value if value is not None else b"null")
                        for name, value in record.headers) or b"NO_HEADERS"
    key = record.key if record.key is not None else b"null"
    value = record.value if record.value is not None else b"null"
    return b"\t".join((headers, bytes(key), bytes(value)))


def _fetch(cluster: Cluster, topic: str, partition: int, positions: dict[int, int],
           read_committed: bool) -> Iterator[Record]:
    """The records of one Fetch from `positions[partition]` on; advances the position."""
    offset = positions[partition]
    answer = cluster.leader(topic, partition).call(
        apis.FETCH, replica_id=-1, max_wait=_FETCH_MAX_WAIT_MS, min_bytes=1, max_bytes=50 * 1024 * 1024,
        isolation_level=int(read_committed), session_id=0, session_epoch=-1,
        topics=[{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                   "partition_max_bytes": 1024 * 1024, "log_start_offset": -1,
                                                   "current_leader_epoch": -1, "last_fetched_epoch": -1}]}],
        forgotten_topics_data=[], rack_id="",
    )
    check(getattr(answer, "error_code", 0), f"Fetch {topic}-{partition}")
    for t in answer.responses:
        for p in t.partitions:
            check(p.error_code, f"Fetch {topic}-{partition}")
            aborted = ReadCommittedFilter([(int(a.first_offset), int(a.producer_id))
                                           for a in (p.aborted_transactions or ())])
            for header, batch in _batches(p.records or b""):
                positions[partition] = header.last_offset + 1
                if read_committed:
                    if aborted.skips(header, batch):
                        continue
                elif header.is_control:  # transaction markers are never records for a reader
                    continue
                for record in iter_records(batch):
                    if record.offset >= offset:
                        yield record


def _batches(data: bytes) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Whole batches of a Fetch answer; a batch cut at the end of the answer is left
    for the next Fetch."""
    view = memoryview(data)
    pos = 0
    while len(view) - pos >= HEADER_SIZE:
        header = BatchHeader.parse(view, pos)
        if pos + header.size > len(view):
            break
        yield header, view[pos : pos + header.size]
        pos += header.batch_length + LOG_OVERHEAD


class ReadCommittedFilter:
    """Which batches of one Fetch answer a read_committed reader skips, as the Java
    consumer decides: from the first offset of an aborted transaction on, that
    producer's transactional batches, until its ABORT marker."""

    def __init__(self, aborted: list[tuple[int, int]]) -> None:
        self._aborted = sorted(aborted)  # (first offset, producer id)
        self._next = 0
        self._aborting: set[int] = set()

    def skips(self, header: BatchHeader, batch: memoryview) -> bool:
        while self._next < len(self._aborted) and self._aborted[self._next][0] <= header.last_offset:
            self._aborting.add(self._aborted[self._next][1])
            self._next += 1
        if header.is_control:
            if parse_marker(batch).type is ControlType.ABORT:
                self._aborting.discard(header.producer_id)
            return True
        return header.is_transactional and header.producer_id in self._aborting
