"""Scale with many clients (issue 15), two measurements:

producers: CONNECTIONS concurrent idempotent producer connections, Ottla against
noida-db in interleaved rounds (a fresh broker each round). 1,000 confluent-kafka
Producers would be 1,000 sets of librdkafka threads on 2 cores, and the clients, not the
broker, would be measured; so the producers are raw sockets driven by asyncio (uvloop),
PROCESSES client processes holding an equal share of the connections (raw_producers.py), built from the
project's own codecs. Each connection gets a producer id of its own (InitProducerId,
no transactional id) and writes to one partition (connection i to partition
i % PARTITIONS of one topic) one Produce at a time (acks=all, BATCH records of SIZE
bytes per batch, sequences consecutive), the next sent when the previous one is
acknowledged. Every connection is connected and has its producer id before the clock
starts; then all are released at once, run WARMUP seconds unmeasured and DURATION
seconds measured: the figure is the records acknowledged within that window, per
second. The client precomputes each connection's request and only patches the
sequence and the CRC per batch, so a connection costs the client one send, one receive
and a response decode per batch.

consumer: Ottla, and Kafka beside it (issue 31). One topic of 1 partition, then (or before: the order alternates
by round) one topic of GROUP_PARTITIONS partitions, each holding the same RECORDS
records (spread evenly), written beforehand by a confluent-kafka idempotent producer;
then one confluent-kafka Consumer with a group.id subscribes to the topic and reads every
record. Timed from the first record to the last (and, second figure, from subscribe(),
which includes joining the group). Targets (issue 31's; issue 15 asked 0.8x): GROUP_PARTITIONS at
least TARGET_CONSUMER (0.9x) the single partition's rate, and Ottla's rate of GROUP_PARTITIONS at
least Kafka's. A case a peer fails is not run on it again. noida-db is left out of the consumer: its read
of one partition fails (it answers over the client's fetch.max.bytes) after the
client's whole timeout.

Both report the broker's resident memory (VmRSS, sampled every SAMPLE_EVERY seconds
while the clients run: the peak, and the value at the end). noida-db's console script is
a Python wrapper around the native broker: its figure is the sum over its process group.

    python -m bench.many_clients [--rounds N] [--only producers|consumer] ...

`python -m bench --only many-producers,group-consumer` runs both with these defaults
(run_many_clients; the consumer on Ottla and Kafka) and judges the targets in its table.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
import queue
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from tests.clients import create_topic

from .peers import KAFKA, Ottla, Peer, peers, process_group
from .raw_producers import CLIENT_TIMEOUT, client_process
from .workloads import BenchProducer, ClientErrors, Job, _consumer

CONNECTIONS = 1_000
PROCESSES = 4
PARTITIONS = 100  # of the producers' topic
BATCH = 10  # records per Produce
SIZE = 100  # bytes per value
WARMUP = 2.0
DURATION = 10.0
GROUP_PARTITIONS = 1_000
RECORDS = 1_000_000
TARGET_CONSUMER = 0.9  # issue 31's bar (issue 15 asked 0.8x)
TARGET_PRODUCERS = 1.0  # Ottla's aggregate at least noida-db's (issue 45; issue 31 asked 0.9x, issue 15 1.0x)
SAMPLE_EVERY = 0.25

# --- memory of a broker ------------------------------------------------------------------


def group_rss_mib(pgid: int) -> float:
    """VmRSS summed over the group (see peers.process_group)."""
    total = 0
    for pid, _ in process_group(pgid):
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
        except OSError:
            continue
    return total / 1024


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU time summed over the group (see peers.process_group)."""
    return sum(int(fields[11]) + int(fields[12]) for _, fields in process_group(pgid)) / os.sysconf("SC_CLK_TCK")


class MemorySampler:
    """Samples a process group's VmRSS in a thread until stopped: the peak and the last."""

    def __init__(self, pgid: int) -> None:
        self.pgid = pgid
        self.peak = self.last = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.last = group_rss_mib(self.pgid)
            self.peak = max(self.peak, self.last)
            if self._stop.wait(SAMPLE_EVERY):
                return

    def stop(self) -> tuple[float, float]:
        self._stop.set()
        self._thread.join()
        return self.peak, self.last



@dataclass
class ProducersResult:
    records: int
    seconds: float
    p50_ms: float
    p99_ms: float
    rss_peak_mib: float
    rss_end_mib: float
    broker_cpu: float  # share of one core the broker used in the measured window
    client_cpu: float  # the same, summed over the client processes

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def _next_event(events: multiprocessing.Queue, deadline: float) -> tuple[str, Any]:
    try:
        kind, value = events.get(timeout=max(0.1, deadline - time.monotonic()))
    except queue.Empty:
        raise TimeoutError("a client process did not report in time") from None
    if kind == "failed":
        raise RuntimeError(value)
    return kind, value


def wait_for_leaders(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Until Metadata shows a leader for every partition of `topic`. Kafka answers
    CreateTopics once its controller has the topic; the broker leads the partitions a
    moment later, and a Produce before that gets NOT_LEADER_OR_FOLLOWER."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        described = admin.list_topics(topic, timeout=10).topics.get(topic)
        if (described is not None and described.error is None and len(described.partitions) == partitions
                and all(p.leader >= 0 and p.error is None for p in described.partitions.values())):
            time.sleep(1.0)  # the leadership applied, not only announced
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: not every partition has a leader after {timeout:.0f} s")
        time.sleep(0.2)


def run_producers(peer: Peer, pgid: int, args: argparse.Namespace,
                  window: tuple[Callable[[], None], Callable[[], None]] | None = None) -> ProducersResult:
    """`window`: called as the measured window opens and as it closes (bench/workload_cpu.py
    counts the broker's work in it)."""
    topic = f"many-producers-{uuid.uuid4().hex[:8]}"
    create_topic(peer.bootstrap, topic, args.partitions)
    wait_for_leaders(peer.bootstrap, topic, args.partitions)
    context = multiprocessing.get_context("spawn")  # a fresh interpreter per client process
    events, go, start_at = context.Queue(), context.Event(), context.Value("d", 0.0)
    shares = [[i % args.partitions for i in range(k, args.connections, args.processes)] for k in range(args.processes)]
    processes = [context.Process(target=client_process, daemon=True, args=(
        peer.bootstrap, topic, share, args.batch, args.size, args.warmup, args.duration, events, go, start_at))
        for share in shares if share]
    for process in processes:
        process.start()
    deadline = time.monotonic() + CLIENT_TIMEOUT
    sampler = MemorySampler(pgid)
    try:
        connected = sum(_next_event(events, deadline)[1] for _ in processes)
        assert connected == args.connections
        start_at.value = started = time.monotonic()
        go.set()
        time.sleep(args.warmup)
        if window is not None:
            window[0]()
        cpu_before = group_cpu_seconds(pgid)
        time.sleep(max(0.0, started + args.warmup + args.duration - time.monotonic()))
        broker_cpu = (group_cpu_seconds(pgid) - cpu_before) / args.duration
        if window is not None:
            window[1]()
        outcomes = [_next_event(events, deadline + args.warmup + args.duration)[1] for _ in processes]
    finally:
        peak, last = sampler.stop()
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    # The per-process medians' median stands for the whole: close enough for one figure.
    return ProducersResult(sum(o[0] for o in outcomes), args.duration, statistics.median(o[1] for o in outcomes) * 1e3,
                           max(o[2] for o in outcomes) * 1e3, peak, last, broker_cpu,
                           sum(o[3] for o in outcomes) / args.duration)


# --- one consumer in a group, 1 partition against GROUP_PARTITIONS -------------------------


def _fill_topic(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    """`records` records spread evenly over the partitions, a partition at a time."""
    job = Job(bootstrap, topic, records, size, time.monotonic() + CLIENT_TIMEOUT)
    producer = BenchProducer(job, **{"batch.size": 1 << 20})
    per_partition = records // partitions
    for partition in range(partitions):
        producer.produce_many(topic, itertools.repeat(bytes(size), per_partition), partition=partition)
    producer.flush()


def _read_all(bootstrap: str, topic: str, records: int) -> tuple[float, float, float]:
    """Subscribe in a group and read `records` records: (seconds from the first record to
    the last, seconds from subscribe() to the last, CPU seconds of this process, all its
    threads (librdkafka's too), from the first record to the last)."""
    job = Job(bootstrap, topic, records, 0, time.monotonic() + CLIENT_TIMEOUT)
    errors = ClientErrors()
    consumer = _consumer(job, errors)
    count = 0
    try:
        subscribed = time.perf_counter()
        consumer.subscribe([topic])
        first = 0.0
        while count < records:
            errors.check(job.deadline, f"consume ({count} of {records} records read)")
            batch = consumer.consume(num_messages=min(10_000, records - count), timeout=0.5)
            if batch and not first:
                first, first_cpu = time.perf_counter(), time.process_time()
            for message in batch:
                if message.error():
                    raise KafkaException(message.error())
            count += len(batch)
        last, last_cpu = time.perf_counter(), time.process_time()
    finally:
        consumer.close()
    return last - first, last - subscribed, last_cpu - first_cpu


def _in_process(target: Callable[..., Any], *args: Any) -> Any:
    """Run a client function in a spawned process of its own (librdkafka's threads do not
    survive a fork); its result, or its exception raised here."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(target, *args).result(timeout=CLIENT_TIMEOUT + 30)


@dataclass
class ConsumerResult:
    partitions: int
    records: int
    first_to_last: float
    from_subscribe: float
    rss_peak_mib: float
    rss_end_mib: float
    client_cpu: float  # share of one core the consumer process used from its first record to its last
    broker_cpu: float  # the broker's, from subscribe() to the last record (first to last is not seen from here)


def run_consumer(make_peer: Callable[[], Peer], partitions: int, args: argparse.Namespace) -> ConsumerResult:
    peer = make_peer()
    try:
        peer.start()
        topic = f"group-read-{partitions}"
        create_topic(peer.bootstrap, topic, partitions)
        records = args.records // partitions * partitions
        _in_process(_fill_topic, peer.bootstrap, topic, partitions, records, args.size)
        sampler = MemorySampler(peer.pid)
        cpu_before = group_cpu_seconds(peer.pid)
        try:
            first_to_last, from_subscribe, client_cpu = _in_process(_read_all, peer.bootstrap, topic, records)
        finally:
            peak, last = sampler.stop()
        broker_cpu = (group_cpu_seconds(peer.pid) - cpu_before) / from_subscribe
        return ConsumerResult(partitions, records, first_to_last, from_subscribe, peak, last,
                              client_cpu / first_to_last, broker_cpu)
    finally:
        peer.stop()


# --- the run -----------------------------------------------------------------------------


def _contenders(args: argparse.Namespace, say: Callable[[str], None]) -> list[tuple[str, Callable[[], Peer]]]:
    contenders: list[tuple[str, Callable[[], Peer]]] = [("Ottla", Ottla)]
    available = peers()
    for name in [name for name in args.peers.split(",") if name]:
        factory = available.get(name, f"unknown peer {name!r}")
        if callable(factory):
            contenders.append((name, factory))
        else:
            say(f"{name} left out: {factory}")
    return contenders


def _producer_rounds(args: argparse.Namespace, say: Callable[[str], None]) -> dict[str, list[ProducersResult | str]]:
    contenders = _contenders(args, say)
    results: dict[str, list[ProducersResult | str]] = {name: [] for name, _ in contenders}
    for r in range(args.rounds):
        for name, make_peer in contenders:
            peer = make_peer()
            try:
                peer.start()
                outcome: ProducersResult | str = run_producers(peer, peer.pid, args)
            except Exception as exc:
                outcome = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                if not peer.alive():
                    outcome += f"; the broker exited:\n{peer.log_tail()}"
            finally:
                peer.stop()
            results[name].append(outcome)
            if isinstance(outcome, str):
                say(f"producers round {r + 1} {name:<9} {outcome}")
            else:
                say(f"producers round {r + 1} {name:<9} {outcome.rate:>10,.0f} records/s, ack p50 "
                    f"{outcome.p50_ms:.1f} ms p99 {outcome.p99_ms:.1f} ms, RSS peak {outcome.rss_peak_mib:.0f} MiB "
                    f"(end {outcome.rss_end_mib:.0f}); CPU: broker {outcome.broker_cpu:.0%}, "
                    f"clients {outcome.client_cpu:.0%} of a core")
    return results


def _consumer_rounds(args: argparse.Namespace, say: Callable[[str], None]
                     ) -> dict[tuple[str, int], list[ConsumerResult | str]]:
    """The target is Ottla's; noida-db (if asked for) runs the same as a reference: if
    its ratio is as low, what bounds the 1,000-partition read is not the broker."""
    contenders = _contenders(args, say)
    results: dict[tuple[str, int], list[ConsumerResult | str]] = {
        (name, p): [] for name, _ in contenders for p in (1, args.group_partitions)}
    for r in range(args.rounds):
        order = [1, args.group_partitions] if r % 2 == 0 else [args.group_partitions, 1]
        for name, make_peer, partitions in [(n, m, p) for n, m in contenders for p in order]:
            if any(isinstance(earlier, str) for earlier in results[name, partitions]):
                continue  # a peer that failed it (a timeout, usually) is not run on it again
            try:
                result: ConsumerResult | str = run_consumer(make_peer, partitions, args)
            except Exception as exc:
                if name == "Ottla":
                    raise
                result = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            results[name, partitions].append(result)
            if isinstance(result, str):
                say(f"consumer round {r + 1} {name:<9} {partitions:>5} partitions: {result}")
                continue
            say(f"consumer round {r + 1} {name:<9} {partitions:>5} partitions: "
                f"{result.records / result.first_to_last:>10,.0f} "
                f"records/s first to last ({result.first_to_last:.2f} s; {result.from_subscribe:.2f} s from "
                f"subscribe), RSS peak {result.rss_peak_mib:.0f} MiB (end {result.rss_end_mib:.0f}); CPU: consumer "
                f"{result.client_cpu:.0%} (first to last), broker {result.broker_cpu:.0%} (from subscribe)")
    return results


def median_rate(outcomes: list[ProducersResult | str]) -> float | None:
    rates = [o.rate for o in outcomes if not isinstance(o, str)]
    return statistics.median(rates) if rates else None


def producers_ratio(produced: dict[str, list[ProducersResult | str]], peer: str = "noida-db") -> float | None:
    """Ottla / `peer`: the median of the per-round ratios, over rounds where both ran."""
    per_round = [o.rate / n.rate for o, n in zip(produced.get("Ottla", []), produced.get(peer, []), strict=False)
                 if not isinstance(o, str) and not isinstance(n, str)]
    return statistics.median(per_round) if per_round else None


@dataclass
class ConsumerFigures:
    """One broker's group reads, medians over the rounds, records/s."""
    one: float  # 1 partition, first record to last
    many: float  # group_partitions partitions, first record to last
    one_from_subscribe: float
    many_from_subscribe: float
    ratio: float  # many / one: the median of the per-round ratios


def consumer_figures(consumed: dict[tuple[str, int], list[ConsumerResult | str]], name: str,
                     group_partitions: int) -> ConsumerFigures | None:
    """None unless both cases have figures. A round's two reads are paired for its ratio."""
    one = consumed.get((name, 1), [])
    many = consumed.get((name, group_partitions), [])
    pairs = [(a, b) for a, b in zip(one, many, strict=False) if not isinstance(a, str) and not isinstance(b, str)]
    if not pairs:
        return None
    median = statistics.median
    return ConsumerFigures(median(a.records / a.first_to_last for a, _ in pairs),
                           median(b.records / b.first_to_last for _, b in pairs),
                           median(a.records / a.from_subscribe for a, _ in pairs),
                           median(b.records / b.from_subscribe for _, b in pairs),
                           median((b.records / b.first_to_last) / (a.records / a.first_to_last) for a, b in pairs))


@dataclass
class ManyClients:
    """What `python -m bench` keeps of its many-producers and group-consumer runs."""
    connections: int
    group_partitions: int
    records: int
    producers: dict[str, list[ProducersResult | str]] | None = None
    consumer: dict[tuple[str, int], list[ConsumerResult | str]] | None = None

    def rss_peaks(self) -> dict[str, float]:
        """Ottla's peak resident memory in MiB per case, over the rounds."""
        peaks = {}
        if self.producers:
            peaks[f"many-producers ({self.connections:,} connections)"] = [
                o.rss_peak_mib for o in self.producers.get("Ottla", []) if not isinstance(o, str)]
        if self.consumer:
            for partitions in (1, self.group_partitions):
                peaks[f"group-consumer ({partitions:,} partition{'s' if partitions > 1 else ''})"] = [
                    o.rss_peak_mib for o in self.consumer.get(("Ottla", partitions), []) if not isinstance(o, str)]
        return {case: max(values) for case, values in peaks.items() if values}


def run_many_clients(rounds: int, producers: bool, consumer: bool, say: Callable[[str], None]) -> ManyClients:
    """The two measurements with the defaults of `python -m bench.many_clients`. The
    consumer runs on Ottla and Kafka only: noida-db's read of one partition fails (it
    answers over the client's fetch.max.bytes) after the client's whole timeout."""
    args = _parser().parse_args(["--rounds", str(rounds)])
    result = ManyClients(args.connections, args.group_partitions, args.records)
    if producers:
        say(f"many producers: {args.connections:,} connections, Ottla, {args.peers}, {rounds} rounds")
        result.producers = _producer_rounds(args, lambda line: say(f"many {line}"))
    if consumer:
        say(f"group consumer: {args.records:,} records, 1 against {args.group_partitions:,} partitions, Ottla and "
            f"Kafka, {rounds} rounds")
        args.peers = KAFKA if KAFKA in args.peers.split(",") else ""
        result.consumer = _consumer_rounds(args, lambda line: say(f"group {line}"))
    return result


def many_clients_lines(result: ManyClients | None) -> list[str]:
    if result is None:
        return []
    lines = []
    if result.producers is not None:
        rows = []
        for name, outcomes in result.producers.items():
            ok = [o for o in outcomes if not isinstance(o, str)]
            failed = [o for o in outcomes if isinstance(o, str)]
            rate = median_rate(outcomes)
            rows.append(f"| {name} | {'n/a' if rate is None else f'{rate:,.0f}'} | "
                        f"{' / '.join(f'{o.rate:,.0f}' for o in ok) or '-'} | "
                        f"{' / '.join(f'{o.broker_cpu:.0%}' for o in ok) or '-'} | "
                        f"{max((o.rss_peak_mib for o in ok), default=0):.0f} |"
                        + (f" {failed[0]}" if failed else ""))
        lines += [f"{result.connections:,} idempotent producer connections, raw sockets, {BATCH} x {SIZE} B a "
                  f"Produce, {WARMUP:g} s warm-up + {DURATION:g} s measured (bench/many_clients.py)", "",
                  "| broker | records/s, median | rounds | broker CPU (of a core) | peak RSS MiB |",
                  "|---|---:|---:|---:|---:|", *rows, ""]
    if result.consumer is not None:
        for name in dict.fromkeys(name for name, _ in result.consumer):
            figures = consumer_figures(result.consumer, name, result.group_partitions)
            failed = [o for (broker, _), outcomes in result.consumer.items() if broker == name
                      for o in outcomes if isinstance(o, str)]
            lines.append(f"One consumer in a group, {result.records:,} records of {SIZE} B in 1 partition or in "
                         f"{result.group_partitions:,} (bench/many_clients.py), {name}: "
                         + ("no figures" if figures is None else
                            f"{figures.one:,.0f} and {figures.many:,.0f} records/s first to last "
                            f"({figures.ratio:.2f}x, the median of the per-round ratios); from subscribe() "
                            f"{figures.one_from_subscribe:,.0f} and {figures.many_from_subscribe:,.0f}")
                         + (f"; {failed[0]}" if failed else "") + ".")
    return lines[:-1] if lines and not lines[-1] else lines


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.many_clients", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peers", default="kafka,noida-db",
                        help="of kafka and noida-db, or '' for Ottla alone (producers; the consumer: kafka only)")
    parser.add_argument("--only", choices=["producers", "consumer"], default=None)
    parser.add_argument("--connections", type=int, default=CONNECTIONS)
    parser.add_argument("--processes", type=int, default=PROCESSES)
    parser.add_argument("--partitions", type=int, default=PARTITIONS, help="of the producers' topic")
    parser.add_argument("--batch", type=int, default=BATCH, help="records per Produce")
    parser.add_argument("--size", type=int, default=SIZE, help="bytes per value")
    parser.add_argument("--warmup", type=float, default=WARMUP)
    parser.add_argument("--duration", type=float, default=DURATION)
    parser.add_argument("--group-partitions", type=int, default=GROUP_PARTITIONS)
    parser.add_argument("--records", type=int, default=RECORDS, help="records the consumer reads")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    def say(line: str) -> None:
        print(line, flush=True)

    say(f"load average {os.getloadavg()[0]:.2f}")
    if args.only in (None, "producers"):
        say(f"producers: {args.connections:,} connections in {args.processes} processes, {args.partitions} partitions, "
            f"{args.batch} x {args.size} B per Produce, {args.warmup:g} s warm-up + {args.duration:g} s measured")
        produced = _producer_rounds(args, say)
        medians = {name: median_rate(outcomes) for name, outcomes in produced.items()}
        line = ", ".join(f"{name} {rate:,.0f}" if rate else f"{name} n/a" for name, rate in medians.items())
        ottla, noida, per_round = medians.get("Ottla"), medians.get("noida-db"), producers_ratio(produced)
        ratio = ""
        if ottla and noida and per_round:
            ratio = f"; Ottla / noida-db {ottla / noida:.2f}x (median of the per-round ratios {per_round:.2f}x)"
        say(f"producers: medians records/s: {line}{ratio}")
    if args.only in (None, "consumer"):
        say(f"consumer: {args.records:,} records of {args.size} B, 1 against {args.group_partitions:,} partitions")
        consumed = _consumer_rounds(args, say)
        for name in dict.fromkeys(name for name, _ in consumed):
            figures = consumer_figures(consumed, name, args.group_partitions)
            if figures is None:
                say(f"consumer {name}: no figures")
                continue
            say(f"consumer {name}: medians records/s first to last: 1 partition {figures.one:,.0f}, "
                f"{args.group_partitions:,} partitions {figures.many:,.0f}: {figures.many / figures.one:.2f}x "
                f"(median of the per-round ratios {figures.ratio:.2f}x; target {TARGET_CONSUMER}x); from subscribe: "
                f"{figures.one_from_subscribe:,.0f} and {figures.many_from_subscribe:,.0f}: "
                f"{figures.many_from_subscribe / figures.one_from_subscribe:.2f}x")
    say(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
