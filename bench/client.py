"""The table of client workloads, and the client process that runs one of them:

    python -m bench.client WORKLOAD --bootstrap HOST:PORT --topic T --messages N --size S --timeout SECONDS

prints one JSON line (a bench.workloads.Measurement) and exits 0; on a failure it prints
the reason to stderr and exits 1. The benchmark runs the client in a subprocess so that
the process measuring and managing the brokers does not share a GIL with it: a client is
timed as a user would run it, alone in its process.

A workload is an entry of WORKLOADS. Its `topic` names the data it works on within a
round: a workload that writes a topic creates it, and the workloads after it in the
table that give the same `topic` read what it wrote.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from .latency import RATE, produce_latency
from .parallel import PARTITIONS, PRODUCERS, parallel_produce
from .share_consume import share_consume
from .workloads import Job, Measurement, consume_all, idempotent_produce, read_committed_consume, transactional_produce


@dataclass(frozen=True)
class Workload:
    name: str
    topic: str
    run: Callable[[Job], Measurement]
    description: str
    # Messages per run: --messages times this. Transactions of 10 messages cost a round
    # trip per 10, and the latency workload runs at a fixed 5,000 a second: at the full
    # count they alone would take most of the run's time budget.
    scale: float = 1.0
    size: int | None = None  # bytes per value; None: --size
    latency: bool = False  # measures p50/p99 latency (lower is better), not a rate

    def messages(self, base: int) -> int:
        return max(1, round(base * self.scale))


WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("idempotent-produce", "idempotent", idempotent_produce,
             "idempotent produce, acks=all, linger.ms=5, one partition"),
    Workload("consume", "idempotent", consume_all, "consume what idempotent-produce wrote"),
    Workload("idempotent-produce-1KiB", "idempotent-1KiB", idempotent_produce,
             "idempotent produce of 1 KiB values", size=1024),
    Workload("txn-produce-1000", "txn-1000", transactional_produce(1000),
             "transactional produce, commit every 1,000 messages"),
    Workload("txn-produce-10", "txn-10", transactional_produce(10),
             "transactional produce, commit every 10 messages", scale=0.1),
    Workload("read-committed-consume", "read-committed", read_committed_consume,
             "read_committed consume; the topic also holds 1 aborted transaction per 2 committed"),
    Workload("parallel-produce", "parallel", parallel_produce,
             f"{PRODUCERS} idempotent producers in parallel processes on {PARTITIONS} partitions", scale=4.0),
    Workload("produce-latency", "latency", produce_latency,
             f"produce latency at {RATE:,} msgs/s, linger.ms=0", scale=0.125, latency=True),
    Workload("share-consume", "share-1", share_consume(1),
             "one share consumer (KIP-932) on one partition, records delivered and acknowledged"),
    Workload("share-consume-4", "share-4", share_consume(4),
             "4 share consumers in one share group, in parallel processes, on one partition"),
]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.client", description="Run one benchmark workload.")
    parser.add_argument("workload", choices=list(WORKLOADS))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--timeout", type=float, required=True, help="seconds the whole workload may take")
    args = parser.parse_args(argv)
    job = Job(args.bootstrap, args.topic, args.messages, args.size, time.monotonic() + args.timeout)
    try:
        result = WORKLOADS[args.workload].run(job)
    except Exception as exc:  # one line for the benchmark to show, not a traceback
        print(f"{args.workload} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(dataclasses.asdict(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
