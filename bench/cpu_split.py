"""The broker's CPU per workload, and how much of it ran beside the event loop (issue 45,
"the second core").

    python -m bench.cpu_split [--baseline REV] [--rounds 3] [--only NAME,NAME]

Ottla's event loop runs in the process's main thread; worker threads (large batches'
CRC-32C and record checks, decompression, checkpoints) and the default executor run
beside it, and C that lets go of the GIL there uses the machine's second core. So:

- `sample(pid)`: the broker process's utime + stime (/proc/<pid>/stat, which keeps the
  CPU of threads that have exited) and its main thread's (/proc/<pid>/task/<pid>/stat);
- `split(before, after)`: the CPU between two samples, on the loop's thread and in all
  the others.

The bench can take a sample before and after any workload (bench/__main__.py's
run_round around run_client) to report each workload's CPU with this split. Run alone,
this module starts a fresh broker per workload and round (this tree's, and with
--baseline the broker of that revision too, bench.peers.baseline_peer, rounds taken in
turn so that the machine's drift falls on both alike), drives the workloads below from
this process with confluent-kafka, and prints each one's median CPU.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient, NewTopic

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuSample:
    process: float  # seconds of CPU of the whole process so far
    loop: float  # of its main thread, the event loop's


@dataclass(frozen=True)
class CpuSplit:
    total: float
    loop: float

    @property
    def other(self) -> float:
        """Seconds of CPU in threads other than the event loop's."""
        return max(0.0, self.total - self.loop)

    @property
    def other_share(self) -> float:
        return self.other / self.total if self.total > 0 else 0.0


def _cpu_seconds(stat_path: str) -> float:
    with open(stat_path) as f:
        fields = f.read().rsplit(")", 1)[1].split()  # the command may hold spaces and parentheses
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime


def sample(pid: int) -> CpuSample:
    return CpuSample(_cpu_seconds(f"/proc/{pid}/stat"), _cpu_seconds(f"/proc/{pid}/task/{pid}/stat"))


def split(before: CpuSample, after: CpuSample) -> CpuSplit:
    return CpuSplit(after.process - before.process, after.loop - before.loop)


# --- the workloads: what each produces, in which batches ------------------------------------

MiB = 1024 * 1024
# Big batches: librdkafka fills a batch up to batch.size, message.max.bytes and
# batch.num.messages; linger.ms gives it the time to (_batches_of).
# Compressible values, as JSON events are (392 bytes).
_JSON = (b'{"event":"page_view","user":"%08d","session":"5f0c2b1e-8d4a-4c1e-9a57-0d3c6e2f1b7a",'
         b'"url":"https://shop.example.com/catalog/items?page=3&sort=price","referrer":"https://search.example.com/",'
         b'"agent":"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36","ms":%06d,"ok":true}')


@dataclass(frozen=True)
class CpuWorkload:
    name: str
    messages: int
    value: Callable[[int], bytes]
    producer: dict[str, object]  # confluent-kafka settings over bench.workloads.BenchProducer's
    topic_config: dict[str, str]
    consume: bool = False  # read back what was produced (the CPU of the read is measured, not of the produce)


def _zeros(size: int) -> Callable[[int], bytes]:
    value = bytes(size)
    return lambda _i: value


def _json(i: int) -> bytes:
    return _JSON % (i, i % 1_000_000)


def _batches_of(size: int, **extra: object) -> dict[str, object]:
    return {"linger.ms": 100, "batch.num.messages": 1_000_000, "batch.size": size, "message.max.bytes": 2 * size,
            **extra}


_ROOM_FOR_8MIB = {"max.message.bytes": str(16 * MiB)}
WORKLOADS = {w.name: w for w in [
    CpuWorkload("idempotent-produce", 1_000_000, _zeros(100), {}, {}),
    CpuWorkload("consume", 1_000_000, _zeros(100), {}, {}, consume=True),
    CpuWorkload("produce-1MiB-batches", 300_000, _zeros(1024), _batches_of(MiB), {"max.message.bytes": str(2 * MiB)}),
    CpuWorkload("produce-8MiB-batches", 300_000, _zeros(1024), _batches_of(8 * MiB), _ROOM_FOR_8MIB),
    CpuWorkload("consume-8MiB-batches", 300_000, _zeros(1024), _batches_of(8 * MiB), _ROOM_FOR_8MIB, consume=True),
    CpuWorkload("zstd-produce-8MiB-batches", 300_000, _json, _batches_of(8 * MiB, **{"compression.type": "zstd"}),
                _ROOM_FOR_8MIB),
    CpuWorkload("lz4-produce-8MiB-batches", 300_000, _json, _batches_of(8 * MiB, **{"compression.type": "lz4"}),
                _ROOM_FOR_8MIB),
]}


def run_workload(workload: CpuWorkload, bootstrap: str, pid: int, timeout: float) -> tuple[float, CpuSplit]:
    """(seconds, the broker's CPU) of the produce, or of the read back with `consume`."""
    from .workloads import BenchProducer, Job, consume_all

    topic = f"cpu-{workload.name}-{uuid.uuid4().hex[:8]}"
    job = Job(bootstrap, topic, workload.messages, 0, time.monotonic() + timeout)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=1, replication_factor=1, config=workload.topic_config)
    for future in admin.create_topics([new]).values():
        future.result(timeout=timeout)
    producer = BenchProducer(job, **workload.producer)  # type: ignore[arg-type]
    producer.warm_up()
    before = sample(pid)
    started = time.perf_counter()
    producer.produce_many(topic, map(workload.value, range(workload.messages)), partition=0)
    producer.flush()
    if workload.consume:
        before = sample(pid)
        started = time.perf_counter()
        measured = consume_all(job)
        if measured.invalid:
            raise RuntimeError(measured.invalid)
    seconds, cpu = time.perf_counter() - started, split(before, sample(pid))
    del producer, admin  # librdkafka's clients close when collected: none is left to reconnect
    return seconds, cpu


def main() -> None:
    from .peers import Ottla, Peer, baseline_peer

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="", metavar="REV", help="also run the broker of this revision")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", metavar="NAME,NAME", help=f"of {', '.join(WORKLOADS)}")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds one workload may take")
    parser.add_argument("--json", default="", metavar="FILE", help="also write every figure to FILE")
    args = parser.parse_args()
    workloads = [WORKLOADS[name] for name in args.only.split(",") if name] or list(WORKLOADS.values())
    brokers: list[tuple[str, Callable[[], Peer]]] = []
    if args.baseline:
        brokers.append(baseline_peer(args.baseline))
    brokers.append(("Ottla", Ottla))
    figures: dict[str, dict[str, list[tuple[float, CpuSplit]]]] = {w.name: {} for w in workloads}
    for r, workload, (name, make) in itertools.product(range(args.rounds), workloads, brokers):
        peer = make()
        peer.start()
        try:
            seconds, cpu = run_workload(workload, peer.bootstrap, peer.pid, args.timeout)
        finally:
            peer.stop()
        figures[workload.name].setdefault(name, []).append((seconds, cpu))
        print(f"round {r + 1} {name:<16} {workload.name:<26} {seconds:6.2f} s  CPU {cpu.total:5.2f} s, "
              f"loop {cpu.loop:5.2f} s, other threads {cpu.other:5.2f} s ({cpu.other_share:.0%})", flush=True)
    print(f"\n| workload | broker | seconds | broker CPU s | on the loop's thread | in other threads |  "
          f"(median of {args.rounds} rounds)\n|---|---|---:|---:|---:|---:|")
    for workload in workloads:
        for name, runs in figures[workload.name].items():
            seconds = statistics.median(s for s, _ in runs)
            total = statistics.median(c.total for _, c in runs)
            loop = statistics.median(c.loop for _, c in runs)
            other = statistics.median(c.other for _, c in runs)
            share = statistics.median(c.other_share for _, c in runs)
            print(f"| {workload.name} | {name} | {seconds:.2f} | {total:.2f} | {loop:.2f} | {other:.2f} "
                  f"({share:.0%}) |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({w: {b: [(s, c.total, c.loop) for s, c in runs] for b, runs in per.items()}
                       for w, per in figures.items()}, f, indent=1)


if __name__ == "__main__":
    main()
