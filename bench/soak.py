"""`make soak`: many clients for a while, abusive ones among them, then a kill -9 loop.

Phase one (`--minutes`, 10 by default): one idempotent and two transactional producers
(tests/integration/crash_producers.py, which write down every acknowledgement), a
consumer group of two, a latency probe (one acks=all Produce at a time, timed), and
enough idle-but-alive connections to make `--connections` (1,000) in all; plus abusive
clients that keep coming: slowloris connections that dribble a request one byte at a
time, clients that vanish in the middle of a request, and frames larger than
socket.request.max.bytes. Every few seconds the broker's resident memory and open
descriptors are sampled.

Phase two (`--cycles`, 100): the producers go on while the broker is killed with
SIGKILL at random moments and restarted.

Phase three (`--streams-cycles`, 10): while the producers still go on, a Kafka Streams
4.3.1 application with processing.guarantee=exactly_once_v2 and group.protocol=streams
(KIP-1071: the broker's coordinator assigns its tasks; tests/java/WordTotals.java, a
repartition and a state store) works through its input while the broker is killed with
SIGKILL and restarted that many times; its output must be every input record's running
total exactly once.

At the end both topics are read back and held against what the producers were told:
acknowledged records lost, duplicates, order, transactions partly visible. The report
gives those, memory and descriptors over time, the probe's produce latency and whether
the Streams output was exact.

    python -m bench.soak [--minutes 10] [--connections 1000] [--cycles 100] [--streams-cycles 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.codec import encode_request, request_class
from ottla.protocol.entities import make
from ottla.testing import BrokerProcess
from tests.integration.crash_producers import check
from tests.integration.test_kafka_streams import HALF, expected_output, first_difference, run_app

ROOT = Path(__file__).resolve().parents[1]
IDEM, TXN = "soak-idempotent", "soak-transactional"


def _resident_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _frame(api_key: int, version: int, correlation_id: int, **values: object) -> bytes:
    return encode_request(correlation_id, "soak", make(request_class(api_key, version), **values))


API_VERSIONS = _frame(18, 3, 1, client_software_name="soak", client_software_version="1")


async def _read_response(reader: asyncio.StreamReader) -> None:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    await reader.readexactly(size)


async def _idle_connection(host: str, port: int, stop: asyncio.Event) -> None:
    """A client that stays connected and asks something now and then."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(host, port)
            while not stop.is_set():
                writer.write(API_VERSIONS)
                await _read_response(reader)
                await asyncio.sleep(random.uniform(5, 30))
        except (OSError, asyncio.IncompleteReadError):
            await asyncio.sleep(1)  # the broker restarted, or closed us as idle


async def _slowloris(host: str, port: int, stop: asyncio.Event, counts: dict[str, int]) -> None:
    while not stop.is_set():
        try:
            _, writer = await asyncio.open_connection(host, port)
            counts["slowloris"] += 1
            for byte in API_VERSIONS:
                if stop.is_set():
                    break
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(random.uniform(1, 5))
            writer.close()
        except OSError:
            await asyncio.sleep(1)


async def _vanisher(host: str, port: int, stop: asyncio.Event, counts: dict[str, int]) -> None:
    big = struct.pack(">i", 50 * 1024 * 1024) + bytes(64 * 1024)  # the start of a 50 MiB request
    oversized = struct.pack(">i", 200 * 1024 * 1024) + bytes(16)  # over socket.request.max.bytes
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(host, port)
            kind = random.choice(("vanished", "oversized"))
            writer.write(big if kind == "vanished" else oversized)
            await writer.drain()
            writer.close()
            counts[kind] += 1
        except OSError:
            pass
        await asyncio.sleep(random.uniform(0.05, 0.5))


async def _probe(host: str, port: int, stop: asyncio.Event, latencies: list[float]) -> None:
    """One acks=all Produce at a time, timed from send to answer."""
    correlation = 0
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(host, port)
            while not stop.is_set():
                correlation += 1
                batch = build_batch([encode_record(None, b"probe", offset_delta=0)], timestamp=int(time.time() * 1000))
                frame = _frame(0, 9, correlation, transactional_id=None, acks=-1, timeout=30000, topic_data=[
                    {"name": "soak-probe", "partition_data": [{"index": 0, "records": batch}]}])
                started = time.perf_counter()
                writer.write(frame)
                await _read_response(reader)
                latencies.append(time.perf_counter() - started)
                await asyncio.sleep(0.05)
        except (OSError, asyncio.IncompleteReadError):
            await asyncio.sleep(0.5)


def _consumers(bootstrap: str, stop: threading.Event, consumed: list[int]) -> None:
    """Two members of one group reading the transactional topic, read_committed."""
    members = [Consumer({"bootstrap.servers": bootstrap, "group.id": "soak-readers",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest", "log_level": 0})
               for _ in range(2)]
    for member in members:
        member.subscribe([TXN])
    while not stop.is_set():
        for member in members:
            message = member.poll(0.2)
            if message is not None and message.error() is None:
                consumed[0] += 1
    for member in members:
        member.close()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _load_phase(broker: BrokerProcess, minutes: float, connections: int, samples: list[tuple[float, float, int]],
                      latencies: list[float], counts: dict[str, int]) -> None:
    host, port_text = broker.bootstrap.rsplit(":", 1)
    port = int(port_text)
    stop = asyncio.Event()
    abusers = 6
    idle = max(connections - abusers - 1 - 8, 0)  # the producers and consumers hold about 8
    tasks = [asyncio.create_task(_idle_connection(host, port, stop)) for _ in range(idle)]
    tasks += [asyncio.create_task(_slowloris(host, port, stop, counts)) for _ in range(abusers // 2)]
    tasks += [asyncio.create_task(_vanisher(host, port, stop, counts)) for _ in range(abusers // 2)]
    tasks.append(asyncio.create_task(_probe(host, port, stop, latencies)))
    started = time.monotonic()
    deadline = started + minutes * 60
    while time.monotonic() < deadline:
        samples.append((time.monotonic() - started, _resident_mib(broker.process.pid),
                        _descriptors(broker.process.pid)))
        await asyncio.sleep(5)
    stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _streams_phase(broker: BrokerProcess, work: Path, cycles: int) -> str:
    """WordTotals with group.protocol=streams through `cycles` kill -9 cycles of the
    broker, each at a point of its first half of input (as
    tests/integration/test_eos_through_broker_crashes.py places them); "" if its output
    was exact, else what went wrong."""
    def kill_and_restart() -> None:
        broker.kill()
        broker.start(timeout=120)

    kills = [(HALF * (i + 1) // (2 * cycles + 2), kill_and_restart) for i in range(cycles)]
    try:
        out, _, app = run_app(broker.bootstrap, work, f"soak-streams-{time.monotonic_ns()}", kills=kills,
                              group_protocol="streams")
    except AssertionError as exc:
        return f"the application failed: {exc}"
    if "STATE ERROR" in app.states:
        return f"the application went to ERROR: {app.states}"
    return first_difference(out, expected_output(2 * HALF))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--streams-cycles", type=int, default=10)
    args = parser.parse_args(argv)
    # A thousand client sockets in this one process.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.connections + 1024)), hard))

    work = Path(tempfile.mkdtemp(prefix="ottla-soak-"))
    broker = BrokerProcess(str(work / "data"), {"log.segment.bytes": str(1024 * 1024),
                                                "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    broker.start()
    for topic in (IDEM, TXN):
        broker.create_topic(topic, 3)
    broker.create_topic("soak-probe", 1)
    stop_file = work / "stop"
    outs = {name: work / f"{name}.out" for name in ("idem", "a", "b")}

    def spawn(*cli: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "tests.integration.crash_producers", *cli], cwd=ROOT,
                                stderr=open(work / "producers.log", "a"))

    producers = [spawn("idempotent", broker.bootstrap, IDEM, str(outs["idem"]), str(stop_file)),
                 spawn("txn", broker.bootstrap, TXN, str(outs["a"]), str(stop_file), "a"),
                 spawn("txn", broker.bootstrap, TXN, str(outs["b"]), str(stop_file), "b")]
    consumer_stop = threading.Event()
    consumed = [0]
    consumer_thread = threading.Thread(target=_consumers, args=(broker.bootstrap, consumer_stop, consumed))
    consumer_thread.start()
    samples: list[tuple[float, float, int]] = []
    latencies: list[float] = []
    counts = {"slowloris": 0, "vanished": 0, "oversized": 0}
    print(f"soak: {args.connections} connections for {args.minutes:g} min, then {args.cycles} kill -9 cycles; "
          f"broker data in {work}, then Kafka Streams through {args.streams_cycles} more", flush=True)
    started = time.monotonic()
    asyncio.run(_load_phase(broker, args.minutes, args.connections, samples, latencies, counts))
    consumer_stop.set()
    consumer_thread.join()
    load_seconds = time.monotonic() - started

    rng = random.Random(20261123)
    kills_started = time.monotonic()
    for _ in range(args.cycles):
        time.sleep(rng.uniform(0.5, 2.5))
        broker.kill()
        broker.start(timeout=120)
    kill_seconds = time.monotonic() - kills_started
    streams_started = time.monotonic()
    streams_wrong = _streams_phase(broker, work, args.streams_cycles)
    streams_seconds = time.monotonic() - streams_started
    time.sleep(3)
    stop_file.touch()
    for producer in producers:
        try:
            producer.wait(180)
        except subprocess.TimeoutExpired:
            producer.kill()
    verdict = check(broker.bootstrap, IDEM, TXN, str(outs["idem"]), [str(outs["a"]), str(outs["b"])])
    broker.stop()

    print(f"load phase: {load_seconds / 60:.1f} min; abusive clients: {counts['slowloris']:,} slowloris, "
          f"{counts['vanished']:,} vanished mid-request, {counts['oversized']:,} oversized frames; "
          f"{consumed[0]:,} records consumed by the group")
    print(f"produce latency (probe, acks=all, {len(latencies):,} requests): "
          f"p50 {_percentile(latencies, 0.5) * 1000:.1f} ms, p99 {_percentile(latencies, 0.99) * 1000:.1f} ms, "
          f"max {max(latencies, default=0) * 1000:.1f} ms")
    print("resident MiB / open descriptors over time: " + ", ".join(
        f"{t / 60:.1f} min {rss:.0f}/{fds}" for t, rss, fds in samples[:: max(1, len(samples) // 12)]))
    if samples:
        print(f"resident memory: first {samples[0][1]:.0f} MiB, peak {max(s[1] for s in samples):.0f} MiB, "
              f"last {samples[-1][1]:.0f} MiB; descriptors: first {samples[0][2]}, peak "
              f"{max(s[2] for s in samples)}, last {samples[-1][2]}")
    print(f"kill -9 loop: {args.cycles} cycles in {kill_seconds / 60:.1f} min")
    print(f"Kafka Streams (exactly_once_v2, group.protocol=streams, {2 * HALF:,} input records) through "
          f"{args.streams_cycles} kill -9 cycles in {streams_seconds / 60:.1f} min: "
          + (f"output NOT exact:\n{streams_wrong}" if streams_wrong else "output exact"))
    print(f"verdict: {verdict.acknowledged:,} acknowledged idempotent records, {verdict.lost} lost, "
          f"{verdict.duplicated} duplicated, {verdict.out_of_order} partitions out of order; "
          f"{verdict.committed:,} committed transactions ({verdict.committed_not_whole} not wholly visible), "
          f"{verdict.others:,} others ({verdict.partial} partly visible)")
    broker.cleanup()
    return 0 if verdict.violations == 0 and not streams_wrong else 1


if __name__ == "__main__":
    sys.exit(main())
