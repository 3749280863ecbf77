"""Start-to-ready next to Apache Kafka (issue 31): Ottla and Kafka, each on a data
directory of PARTITIONS partitions (in topics of PER_TOPIC) holding RECORDS records (`python -m bench` runs it
also with MANY_PARTITIONS and MANY_RECORDS, beside bench/many_partitions.py), restarted after a clean stop
(SIGTERM) and after kill -9, in interleaved rounds (a fresh broker of each per round).

A start runs from the new process's start to ready: for Ottla, its ready line and its
coordinators loaded (BrokerProcess.start); for Kafka, an answer to ApiVersions and a
Metadata answer listing the broker (tests/reference/kafka.py, the fixture the
conformance tests use). Each broker's peak resident memory (VmHWM) is read at ready
after the start after kill -9 and after writing.

With --empty RUNS it times, instead, a new user's first start (issue 45): from the exec
of `ottla serve` on an empty data directory to its ready line, a fresh directory each run
(`python -m bench` times EMPTY_RUNS of them after the rounds; target: the median under
EMPTY_READY_SECONDS).

    python -m bench.starts [--rounds 3] [--partitions 1000] [--records 20000]
    python -m bench.starts --empty 21
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Producer

from ottla.testing import BrokerProcess
from tests.clients import create_topic

from .peers import KAFKA, Kafka, Ottla, peak_resident, peers

PARTITIONS = 1_000
RECORDS = 20_000
MANY_PARTITIONS = 10_000  # issue 31's second size
MANY_RECORDS = 100_000
SIZE = 100
TOPIC = "starts"
PER_TOPIC = 1_000  # Kafka refuses a CreateTopics of 10,000 partitions ("excessively large batch operation")
EMPTY_RUNS = 11  # first starts on an empty data directory, in `python -m bench`
EMPTY_READY_SECONDS = 0.5  # issue 45: an empty broker ready in well under half a second


@dataclass
class BrokerStarts:
    broker: str
    partitions: int = 0
    records: int = 0
    clean: list[float] = field(default_factory=list)  # seconds, per round
    crashed: list[float] = field(default_factory=list)  # after kill -9
    rss_peak: list[int] = field(default_factory=list)  # bytes, per round
    failure: str = ""


def _fill(bootstrap: str, partitions: int, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    value = bytes(SIZE)
    for i in range(records):
        topic, partition = divmod(i % partitions, PER_TOPIC)
        while True:
            try:
                producer.produce(f"{TOPIC}-{topic}", value, partition=partition)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("records left unacknowledged")


def time_starts(make_peer: Callable[[], Ottla | Kafka], result: BrokerStarts) -> None:
    peer = make_peer()
    try:
        peer.start()
        for first in range(0, result.partitions, PER_TOPIC):
            create_topic(peer.bootstrap, f"{TOPIC}-{first // PER_TOPIC}", min(PER_TOPIC, result.partitions - first))
        _fill(peer.bootstrap, result.partitions, result.records)
        result.clean.append(peer.restart(False))
        result.crashed.append(peer.restart(True))
        result.rss_peak.append(peak_resident(peer.pid))
    finally:
        peer.stop()


def time_empty_starts(runs: int) -> list[float]:
    """Seconds from the exec of `ottla serve` on an empty data directory to its ready
    line, one run each (the coordinators of an empty directory load right after)."""
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="bench-empty-") as work:
            broker = BrokerProcess(os.path.join(work, "data"), log_path=os.path.join(work, "broker.log"))
            started = time.monotonic()
            broker.start(wait_for_coordinators=False)
            times.append(time.monotonic() - started)
            broker.stop()
    return times


def run_starts(rounds: int, say: Callable[[str], None], partitions: int = PARTITIONS,
               records: int = RECORDS) -> dict[str, BrokerStarts]:
    contenders: list[tuple[str, Callable[[], Ottla | Kafka]]] = [("Ottla", Ottla)]
    kafka = peers()[KAFKA]
    if callable(kafka):
        contenders.append((KAFKA, Kafka))
    else:
        say(f"starts: kafka left out: {kafka}")
    results = {name: BrokerStarts(name, partitions, records) for name, _ in contenders}
    say(f"starts: {', '.join(results)}, {partitions:,} partitions, {records:,} records, {rounds} rounds")
    for r in range(rounds):
        for name, make_peer in contenders:
            result = results[name]
            if result.failure:
                continue
            try:
                time_starts(make_peer, result)
            except Exception as exc:
                if name == "Ottla":
                    raise
                result.failure = f"failed in round {r + 1}: {type(exc).__name__}: {str(exc).splitlines()[0]}"
                say(f"starts round {r + 1} {name:<6} {result.failure}")
                continue
            say(f"starts round {r + 1} {name:<6} clean {result.clean[-1]:.2f} s, after kill -9 "
                f"{result.crashed[-1]:.2f} s, peak RSS {result.rss_peak[-1] / 2**20:.0f} MiB")
    return results


def starts_lines(results: dict[str, BrokerStarts] | None) -> list[str]:
    if not results:
        return []

    def cell(values: list[float]) -> str:
        if not values:
            return "n/a"
        return f"{statistics.median(values):.2f} ({' / '.join(f'{v:.2f}' for v in values)})"

    first = next(iter(results.values()))
    lines = [f"Start-to-ready, {first.partitions:,} partitions holding {first.records:,} records of {SIZE} B "
             "(bench/starts.py): "
             "medians over the rounds, seconds from the process's start to ready", "",
             "| broker | clean start s (rounds) | after kill -9 s (rounds) | peak RSS MiB |", "|---|---:|---:|---:|"]
    for result in results.values():
        rss = f"{max(result.rss_peak) / 2**20:.0f}" if result.rss_peak else "n/a"
        lines.append(f"| {result.broker} | {cell(result.clean)} | {cell(result.crashed)} | {rss} |"
                     + (f" {result.failure}" if result.failure else ""))
    return lines


def empty_start_lines(times: list[float] | None) -> list[str]:
    if not times:
        return []
    return [f"A first start on an empty data directory (bench/starts.py --empty): `ottla serve` exec to ready, "
            f"median {statistics.median(times):.3f} s over {len(times)} starts (least {min(times):.3f}, most "
            f"{max(times):.3f}; target under {EMPTY_READY_SECONDS:g} s)."]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.starts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=PARTITIONS)
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--empty", type=int, metavar="RUNS", help="time RUNS first starts on an empty data directory")
    args = parser.parse_args()
    if args.empty:
        times = time_empty_starts(args.empty)
        print(f"empty data directory, exec to ready: median {statistics.median(times):.3f} s over {len(times)} runs "
              f"(least {min(times):.3f}, most {max(times):.3f})")
        return
    print("\n".join(starts_lines(run_starts(args.rounds, lambda line: print(line, flush=True), args.partitions,
                                            args.records))))


if __name__ == "__main__":
    main()
