"""The targets against Apache Kafka 4.3.1 (the peer `kafka`), set by issue 31 and kept by
issue 45: every throughput workload (the share consumers' too) at least Kafka's rate,
every request's p50 no higher than Kafka's, start-to-ready at most 0.1x Kafka's, and
resident memory at most 0.2x Kafka's in every case measured on both. Each is judged
against the run's A/A spread (bench/verdicts.py).
"""

from __future__ import annotations

import statistics
from typing import Any

from .client import WORKLOADS
from .many_clients import consumer_figures, producers_ratio
from .peers import KAFKA
from .report import OTTLA, Run, median_of, median_ratio
from .round_trips import REQUESTS as ROUND_TRIP_REQUESTS
from .round_trips import session_ratio
from .scale import MIB
from .verdicts import NOT_JUDGED, Target, aa_spread, judged, memory_spread, noise_note

KAFKA_THROUGHPUT = 1.0  # every throughput workload at least Kafka's
KAFKA_P50 = 1.0  # per-request p50 no higher than Kafka's
KAFKA_START = 0.1  # start-to-ready at most a tenth of Kafka's
KAFKA_MEMORY = 0.2  # resident memory at most a fifth of Kafka's
SHARE_WORKLOADS = ("share-consume", "share-consume-4")  # issue 45: "a share consumer's throughput at least Kafka's"
GROUP_CONSUMER_CASE = "group-consumer"  # the memory case issue 45 names


def kafka_targets(run: Run) -> list[Target]:
    """Ottla against Apache Kafka 4.3.1, where Kafka ran."""
    rows: list[Target] = []
    spread = aa_spread(run)
    note = noise_note(spread)
    if KAFKA in run.brokers:
        for workload in run.workloads:
            if WORKLOADS[workload].latency:
                ratio = median_of([ours.p50_ms / theirs.p50_ms for r, ours in run.rounds[OTTLA][workload].items()
                                 if (theirs := run.rounds[KAFKA][workload].get(r)) is not None
                                 and not ours.invalid and not theirs.invalid and ours.p50_ms and theirs.p50_ms])
                target = f"{workload}: p50 no higher than Kafka's"
                bar, higher, issue = KAFKA_P50, False, "31"
            else:
                ratio = median_ratio(run, workload, KAFKA)
                target = f"{workload}: >= {KAFKA_THROUGHPUT}x Kafka"
                bar, higher = KAFKA_THROUGHPUT, True
                issue = "42, 45" if workload in SHARE_WORKLOADS else "31, 45"
            key = f"kafka {workload}"
            if ratio is None:
                reason = run.failures[KAFKA].get(workload, "no round with valid figures of both")
                rows.append(Target(key, target, f"n/a ({reason})", NOT_JUDGED, against=KAFKA, issue=issue))
            else:
                rows.append(Target(key, target, f"{ratio:.2f}x kafka ({note})", judged(ratio, bar, higher, spread),
                                   ratio, KAFKA, issue=issue))
    rows += _round_trip_targets(run)
    rows += _many_clients_targets(run, spread)
    rows += _start_targets(run, spread)
    rows += _memory_targets(run, spread)
    return rows


def _round_trip_targets(run: Run) -> list[Target]:
    kafka = next((r for r in run.round_trips or [] if r.broker == KAFKA), None)
    if kafka is None:
        return []
    ottla, spread = run.round_trips[0], aa_spread(run, round_trips=True)
    rows = []
    for name in ROUND_TRIP_REQUESTS:
        ratio = session_ratio(ottla, kafka, name)
        rows.append(Target(f"kafka round-trip {name}", f"round trip, {name}: p50 no higher than Kafka's",
                           f"{ratio:.2f}x kafka ({ottla.percentile(name, 0.5) * 1e6:,.0f} / "
                           f"{kafka.percentile(name, 0.5) * 1e6:,.0f} us; {noise_note(spread)})",
                           judged(ratio, KAFKA_P50, False, spread), ratio, KAFKA, issue="31, 45"))
    return rows


def _many_clients_targets(run: Run, spread: float | None) -> list[Target]:
    clients, note = run.many_clients, noise_note(spread)
    if clients is None:
        return []
    rows = []
    if clients.producers is not None and KAFKA in clients.producers:
        target = f"{clients.connections:,} concurrent producer connections: >= {KAFKA_THROUGHPUT}x Kafka"
        ratio = producers_ratio(clients.producers, KAFKA)
        rows.append(Target("kafka many-producers", target, "no round with figures of both" if ratio is None
                           else f"{ratio:.2f}x kafka ({note})",
                           NOT_JUDGED if ratio is None else judged(ratio, KAFKA_THROUGHPUT, True, spread), ratio,
                           KAFKA, issue="31, 45"))
    if clients.consumer is not None and (KAFKA, clients.group_partitions) in clients.consumer:
        target = (f"a consumer of {clients.group_partitions:,} partitions in one group: >= {KAFKA_THROUGHPUT}x "
                  "Kafka's rate")
        ours = consumer_figures(clients.consumer, OTTLA, clients.group_partitions)
        theirs = consumer_figures(clients.consumer, KAFKA, clients.group_partitions)
        if ours is None or theirs is None:
            rows.append(Target("kafka group-consumer", target, "no figures of both", NOT_JUDGED, against=KAFKA,
                               issue="31, 45"))
        else:
            ratio = ours.many / theirs.many
            rows.append(Target("kafka group-consumer", target,
                               f"{ratio:.2f}x kafka ({ours.many:,.0f} / {theirs.many:,.0f} records/s; {note})",
                               judged(ratio, KAFKA_THROUGHPUT, True, spread), ratio, KAFKA, issue="31, 45"))
    return rows


def _start_targets(run: Run, spread: float | None) -> list[Target]:
    rows = []
    for starts, size in ((run.starts, ""), (run.starts_many, " many")):
        if starts and OTTLA in starts and KAFKA in starts:
            rows += _start_rows(starts[OTTLA], starts[KAFKA], size, spread)
    return rows


def _start_rows(ours: Any, theirs: Any, size: str, spread: float | None) -> list[Target]:
    rows = []
    for kind, what in (("clean", "after a clean stop"), ("crashed", "after kill -9")):
        target = f"{ours.partitions:,} partitions, start-to-ready {what}: at most {KAFKA_START}x Kafka's"
        mine, kafka = getattr(ours, kind), getattr(theirs, kind)
        key = f"kafka start{size} {kind}"
        # Issue 45 asks again for the clean start at 1,000 partitions; the others are issue 31's.
        issue = "31, 45" if (kind, size) == ("clean", "") else "31"
        if not mine or not kafka:
            rows.append(Target(key, target, f"n/a ({theirs.failure or 'no figures'})", NOT_JUDGED, against=KAFKA,
                               issue=issue))
            continue
        a, b = statistics.median(mine), statistics.median(kafka)
        rows.append(Target(key, target, f"{a / b:.3f}x kafka ({a:.2f} / {b:.2f} s; {noise_note(spread)})",
                           judged(a / b, KAFKA_START, False, spread), a / b, KAFKA, issue=issue))
    return rows


def kafka_memory_ratios(run: Run) -> dict[str, tuple[float, float]]:
    """(Ottla's peak MiB, Kafka's peak MiB) per case where both were measured: the
    workloads' highest over the rounds, the starts', the many-clients cases'."""
    pairs = {w: (max(run.memory[w]) / MIB, max(rss) / MIB) for w, rss in run.kafka_memory.items()
             if rss and run.memory.get(w)}
    for starts in (run.starts, run.starts_many):
        if starts and OTTLA in starts and KAFKA in starts:
            ours, theirs = starts[OTTLA].rss_peak, starts[KAFKA].rss_peak
            if ours and theirs:
                pairs[f"starts ({starts[OTTLA].partitions:,} partitions)"] = (max(ours) / MIB, max(theirs) / MIB)
    clients = run.many_clients
    if clients is not None and clients.producers and KAFKA in clients.producers:
        ok = {name: [o.rss_peak_mib for o in clients.producers[name] if not isinstance(o, str)]
              for name in (OTTLA, KAFKA)}
        if ok[OTTLA] and ok[KAFKA]:
            pairs["many-producers"] = (max(ok[OTTLA]), max(ok[KAFKA]))
    if clients is not None and clients.consumer:
        for partitions in (1, clients.group_partitions):
            ok = {name: [o.rss_peak_mib for o in clients.consumer.get((name, partitions), [])
                         if not isinstance(o, str)] for name in (OTTLA, KAFKA)}
            if ok[OTTLA] and ok[KAFKA]:
                pairs[f"{GROUP_CONSUMER_CASE} ({partitions:,})"] = (max(ok[OTTLA]), max(ok[KAFKA]))
    return pairs


def _memory_targets(run: Run, spread: float | None) -> list[Target]:
    pairs = kafka_memory_ratios(run)
    if not pairs:
        return []
    # Memory has an A/A of its own where ottla-2 ran the workloads: the throughput's
    # spread says nothing about how much two resident sizes of the same code differ.
    spread = memory_spread(run) if run.control_memory else spread
    worst = max(pairs, key=lambda case: pairs[case][0] / pairs[case][1])
    ours, theirs = pairs[worst]
    rows = [Target("kafka rss", f"resident memory at most {KAFKA_MEMORY}x Kafka's in every case measured on both",
                   f"at worst {ours / theirs:.2f}x kafka ({worst}: {ours:.0f} / {theirs:.0f} MiB), of {len(pairs)}; "
                   f"{noise_note(spread)}", judged(ours / theirs, KAFKA_MEMORY, False, spread), ours / theirs,
                   KAFKA, issue="31, 45")]
    # Issue 45 names the 1,000-partition group consumer (issue 31's one miss): its own row.
    clients = run.many_clients
    case = f"{GROUP_CONSUMER_CASE} ({clients.group_partitions:,})" if clients is not None else ""
    if case in pairs:
        ours, theirs = pairs[case]
        rows.append(Target("kafka rss group-consumer", f"resident memory, a consumer of "
                           f"{clients.group_partitions:,} partitions in one group: at most {KAFKA_MEMORY}x Kafka's",
                           f"{ours / theirs:.2f}x kafka ({ours:.0f} / {theirs:.0f} MiB; {noise_note(spread)})",
                           judged(ours / theirs, KAFKA_MEMORY, False, spread), ours / theirs, KAFKA, issue="45"))
    return rows
