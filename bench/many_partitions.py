"""Start-up with many partitions (issue 15: 10,000 partitions ready in under 2 s, under
300 MiB resident), Ottla only.

A data directory of TOPICS x PER_TOPIC partitions, RECORDS idempotent batches of one
record each, is written through the storage code and kept as two templates: one
closed cleanly and one left as a kill -9 leaves it (every partition's data then lies past its recovery point, so all of
it is checked again, as Kafka's rules require). Each timed start runs on a fresh copy
of a template and is timed from the process's start to its "ottla ready" line; the
broker's peak resident memory (VmHWM) is read right after it.

`--checkpoint-latency` instead sends acks=all produces one at a time, from the ready line
of a start after kill -9 until its checkpoint (the flush of what recovery checked, and a
snapshot of every partition) has finished, and reports their latency: what a client
sees while the broker writes 10,000 partitions' state.

`--base DIR` also times the broker of another source tree (an `ottla` package
directory laid out as the installed one: DIR/ottla/storage ...), interleaved round by
round with this one on copies of the same templates: the A/B of a change.

    python -m bench.many_partitions [--rounds 3] [--base /tmp/ab/base]

`python -m bench --only many-partitions` runs this tree alone (run_many_partitions) and
judges the targets in its table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from ottla.protocol.batch import BatchHeader, build_batch, encode_record
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager
from ottla.testing import BrokerProcess

from .peers import peak_resident
from .scale import MIB

TOPICS = 100
PER_TOPIC = 100
RECORDS = 10
VALUE = bytes(100)
NOW_MS = 1_700_000_000_000
START_TIMEOUT = 300.0
CLEAN, CRASHED = "clean", "after kill -9"


def write_template(data_dir: str, topics: int, per_topic: int, batches: int, clean: bool) -> None:
    """A data directory of `topics` x `per_topic` partitions, each holding `batches`
    idempotent batches of one record (one producer per topic), written through the
    storage code as the broker writes them; closed cleanly, or left as a kill -9 leaves
    it: nothing flushed, no checkpoint past offset 0, no snapshot, no clean marker."""
    logs = LogManager(data_dir, LogConfig())
    logs.load()
    record = encode_record(None, VALUE)
    for t in range(topics):
        topic = logs.create_topic(f"t{t:03d}", per_topic)
        producer_id = 1000 + t
        for log in topic.partitions:
            for sequence in range(batches):
                batch = build_batch([record], timestamp=NOW_MS + sequence, producer_id=producer_id,
                                    producer_epoch=0, base_sequence=sequence)
                log.append_batch(batch, BatchHeader.parse(batch))
    if clean:
        logs.close()
    else:
        for log in logs.all_partitions():
            log.close_files()


@dataclass
class Start:
    seconds: float
    cpu_seconds: float  # the broker's own CPU time (user + system) until ready
    rss: int  # the peak until ready (VmHWM)
    ready_line: str


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process: on a machine shared with other work the
    wall-clock time of a start swings by 2x, its CPU time much less."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_start(template: str, work: str, pythonpath: str | None) -> Start:
    data_dir = os.path.join(work, "data")
    shutil.rmtree(data_dir, ignore_errors=True)
    subprocess.run(["cp", "-a", template, data_dir], check=True)
    subprocess.run(["sync"], check=True)  # the copy's writeback must not land on the start
    env = {"PYTHONPATH": pythonpath} if pythonpath else {}
    log_path = os.path.join(work, "broker.log")
    broker = BrokerProcess(data_dir, log_path=log_path, env=env)
    started = time.monotonic()
    broker.start(timeout=START_TIMEOUT, wait_for_coordinators=False)
    seconds = time.monotonic() - started
    assert broker.process is not None
    rss = peak_resident(broker.process.pid)
    cpu = _cpu_seconds(broker.process.pid)
    broker.kill()
    with open(log_path) as f:
        ready = [line for line in f if "ottla ready" in line][-1].strip()
    os.unlink(log_path)
    return Start(seconds, cpu, rss, ready)


def time_starts(clean: str, crashed: str | None, trees: dict[str, str | None], rounds: int, work: str,
                say: Callable[[str], None]) -> dict[tuple[str, str], list[Start]]:
    """Starts on copies of the templates (`crashed` None: clean starts only), each
    source tree in `trees` (name -> PYTHONPATH, None for this one) in turn, the order
    alternating by round: (kind, tree) -> the starts."""
    results: dict[tuple[str, str], list[Start]] = {}
    for round_ in range(rounds):
        order = list(trees.items()) if round_ % 2 == 0 else list(reversed(trees.items()))
        kinds = [(CLEAN, clean)] + ([(CRASHED, crashed)] if crashed else [])
        for kind, template in kinds:
            for name, path in order:
                start = timed_start(template, work, path)
                results.setdefault((kind, name), []).append(start)
                say(f"round {round_ + 1} {kind:14s} {name:5s} {start.seconds:6.2f} s  CPU {start.cpu_seconds:5.2f} s  "
                    f"RSS {start.rss / MIB:.0f} MiB  | {start.ready_line[-200:]}")
    return results


@dataclass
class PartitionStarts:
    """`python -m bench`'s many-partitions: this tree's starts, clean and after kill -9."""
    partitions: int
    clean: list[Start]
    crashed: list[Start]


def run_many_partitions(rounds: int, say: Callable[[str], None]) -> PartitionStarts:
    directory = tempfile.mkdtemp(prefix="bench-partitions-")
    try:
        began = time.monotonic()
        clean, crashed = (os.path.join(directory, k) for k in ("clean", "crashed"))
        write_template(clean, TOPICS, PER_TOPIC, RECORDS, clean=True)
        write_template(crashed, TOPICS, PER_TOPIC, RECORDS, clean=False)
        say(f"many partitions: templates of {TOPICS * PER_TOPIC:,} partitions written in "
            f"{time.monotonic() - began:.1f} s")
        starts = time_starts(clean, crashed, {"this": None}, rounds, directory,
                             lambda line: say(f"many partitions: {line}"))
        return PartitionStarts(TOPICS * PER_TOPIC, starts[CLEAN, "this"], starts[CRASHED, "this"])
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _rounds(values: list[float]) -> str:
    return " / ".join(f"{v:.2f}" for v in values)


def many_partitions_lines(result: PartitionStarts | None) -> list[str]:
    if result is None:
        return []
    rows = []
    for kind, starts in ((CLEAN, result.clean), (CRASHED, result.crashed)):
        wall, cpu = [s.seconds for s in starts], [s.cpu_seconds for s in starts]
        rows.append(f"| {kind} | {statistics.median(wall):.2f} ({_rounds(wall)}) | "
                    f"{statistics.median(cpu):.2f} ({_rounds(cpu)}) | {max(s.rss for s in starts) / MIB:.0f} |")
    return [f"{result.partitions:,} partitions starting ({TOPICS} topics x {PER_TOPIC}, {RECORDS} idempotent batches "
            f"of one {len(VALUE)}-byte record each; bench/many_partitions.py): medians over the rounds, from the "
            f"process's start to its ready line", "",
            "| start | wall s (rounds) | CPU s (rounds) | peak RSS at ready, MiB |",
            "|---|---:|---:|---:|", *rows]


# The broker's log line once the checkpoint after recovery is done (broker/server.py).
CHECKPOINTED = "recovered logs flushed and checkpointed"


@dataclass
class CheckpointLatency:
    # The first produce apart: it includes the client's connection and metadata (35-40 ms
    # here), which the checkpoint has no part in; it was the "40-50 ms" maximum of
    # earlier runs, while the event loop never waited more than 20 ms (probed).
    first_ms: float
    latencies_ms: list[float]
    checkpoint_line: str

    def summary(self) -> str:
        ordered = sorted(self.latencies_ms)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return (f"{len(ordered)} produces after the first: p50 {statistics.median(ordered):.1f} ms, p99 {p99:.1f} ms, "
                f"max {ordered[-1]:.1f} ms (the first, connecting: {self.first_ms:.1f} ms)")


def checkpoint_latency(template: str, work: str, pythonpath: str | None) -> CheckpointLatency:
    """acks=all produces, one at a time, round the partitions of the first topic, from
    the ready line of a start on `template` until its post-recovery checkpoint is done."""
    from confluent_kafka import Producer

    data_dir = os.path.join(work, "data")
    shutil.rmtree(data_dir, ignore_errors=True)
    subprocess.run(["cp", "-a", template, data_dir], check=True)
    subprocess.run(["sync"], check=True)
    env = {"PYTHONPATH": pythonpath} if pythonpath else {}
    log_path = os.path.join(work, "broker.log")
    broker = BrokerProcess(data_dir, log_path=log_path, env=env)
    broker.start(timeout=START_TIMEOUT, wait_for_coordinators=False)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    latencies: list[float] = []
    done = ""
    try:
        with open(log_path) as log:
            while not done:
                for i in range(50):
                    sent = time.perf_counter()
                    producer.produce("t000", VALUE, partition=(len(latencies) + i) % PER_TOPIC)
                    if producer.flush(30) != 0:
                        raise RuntimeError("a produce was not acknowledged within 30 s")
                    latencies.append((time.perf_counter() - sent) * 1000)
                done = next((line.strip() for line in log if CHECKPOINTED in line), "")
    finally:
        broker.kill()
        os.unlink(log_path)
    return CheckpointLatency(latencies[0], latencies[1:], done)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--topics", type=int, default=TOPICS)
    parser.add_argument("--per-topic", type=int, default=PER_TOPIC)
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--base", help="source tree of the broker to compare with (A/B)")
    parser.add_argument("--templates", help="a directory holding clean/ and crashed/ from an earlier run")
    parser.add_argument("--clean-only", action="store_true", help="time only starts after a clean shutdown")
    parser.add_argument("--checkpoint-latency", action="store_true",
                        help="produce latency during the checkpoint after a start after kill -9")
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="bench-partitions-")
    try:
        if args.templates:
            clean, crashed = (os.path.join(args.templates, k) for k in ("clean", "crashed"))
        else:
            began = time.monotonic()
            clean, crashed = (os.path.join(directory, k) for k in ("clean", "crashed"))
            write_template(clean, args.topics, args.per_topic, args.records, clean=True)
            write_template(crashed, args.topics, args.per_topic, args.records, clean=False)
            print(f"templates written in {time.monotonic() - began:.1f} s", flush=True)
        trees = {"this": None} | ({"base": args.base} if args.base else {})
        if args.checkpoint_latency:
            for round_ in range(args.rounds):
                order = list(trees.items()) if round_ % 2 == 0 else list(reversed(trees.items()))
                for name, path in order:
                    got = checkpoint_latency(crashed, directory, path)
                    print(f"round {round_ + 1} {name:5s} {got.summary()}  | {got.checkpoint_line[-120:]}",
                          flush=True)
            return
        results = time_starts(clean, None if args.clean_only else crashed, trees, args.rounds, directory,
                              lambda line: print(line, flush=True))
        print()
        for (kind, name), starts in results.items():
            seconds = [s.seconds for s in starts]
            cpu = [s.cpu_seconds for s in starts]
            print(f"{kind:14s} {name:5s} median {statistics.median(seconds):.2f} s "
                  f"(rounds: {' / '.join(f'{s:.2f}' for s in seconds)}), "
                  f"CPU median {statistics.median(cpu):.2f} s (rounds: {' / '.join(f'{s:.2f}' for s in cpu)}), "
                  f"RSS max {max(s.rss for s in starts) / MIB:.0f} MiB")
    finally:
        if not args.templates:
            keep = os.environ.get("KEEP_TEMPLATES")
            if keep:
                for kind in ("clean", "crashed"):
                    target = os.path.join(keep, kind)
                    if not os.path.exists(target):
                        shutil.copytree(os.path.join(directory, kind), target, symlinks=True)
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
