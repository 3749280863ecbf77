"""The targets of issues 3, 6, 15 and 31, each judged on the figures of one run (a Run of
bench/report.py), as the table at the end of a run and bench/runs/<start>.json give them.

Issue 31's targets are set against Apache Kafka (the peer `kafka`) and against the best
native peer (NATIVE_PEERS: brokers that keep their data, not librdkafka's mock cluster,
which issue 6's "best peer" includes), and are judged against the run's own A/A spread
(how far Ottla/ottla-2, the same code, strayed from 1.0 in this run; for resident memory,
how far Ottla's peak strayed from ottla-2's): met only where the ratio clears the bar by
more than the spread, missed only where it falls short by more, and "within noise" in between.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .client import WORKLOADS
from .coordinator_load import READY_TARGET
from .many_clients import TARGET_CONSUMER as GROUP_CONSUMER_TARGET
from .many_clients import TARGET_PRODUCERS, consumer_figures, median_rate, producers_ratio
from .peers import BASELINE_PREFIX, CONTROL, KAFKA
from .report import OTTLA, Run, markdown_table, median_figure, median_of, median_ratio
from .round_trips import REQUESTS as ROUND_TRIP_REQUESTS
from .round_trips import TARGET as ROUND_TRIP_TARGET
from .round_trips import session_ratio
from .scale import GIB, MIB, PARTITIONS, TAIL_BYTES

# Targets of issues 6 and 15, each judged on the ratios of one run.
WITHIN_BEST_PEER = 0.95  # idempotent produce: within 5 % of the best peer
AT_LEAST_FASTEST_PEER = 1.0  # transactional produce, consume, parallel producers
# Issue 31's "native peers": brokers that keep their data, as Ottla does. librdkafka's mock
# cluster holds everything in memory and is left out of them (not of issue 6's best peer).
NATIVE_PEERS = ("noida-db", "tansu")
P99_OF_NOIDA = 2.0  # latency: p99 within 2x noida-db's
CLEAN_START_SECONDS = 2.0
RSS_LIMIT = 300 * MIB
# kill -9: the recovery's cost beyond a clean start at the full size may be at most this
# many times the one at half the size (a recovery that checks all the data doubles it),
# plus RECOVERY_SLACK_SECONDS for timing noise.
RECOVERY_GROWTH = 1.5
RECOVERY_SLACK_SECONDS = 0.25


MET, MISSED, NOT_JUDGED, REPORTED = "met", "**missed**", "not judged", "reported (no numeric bar)"
WITHIN_NOISE = "within noise"
NOISE = "the run's noise (no bar)"
# What a target's figure is, for bench.compare: the issue asks the ratios to reproduce
# within the noise band; a time or a size is compared by its verdict.
RATIO, ABSOLUTE, CONTROL_RATIO = "ratio", "absolute", "A/A"


@dataclass
class Target:
    """One row of the targets table. `key` names the target the same way in every run
    and `figure` is its number (a ratio, seconds or MiB), so that bench.compare can set
    two runs side by side."""
    key: str
    target: str
    measured: str
    verdict: str
    figure: float | None = None
    against: str = ""  # the peer a ratio is to, where the best peer is chosen per run
    kind: str = RATIO  # RATIO, ABSOLUTE (seconds, MiB) or CONTROL_RATIO (Ottla/ottla-2)


def _verdict(met: bool) -> str:
    return MET if met else MISSED


def _best_peer(run: Run, workload: str, eligible: Callable[[str], bool]) -> str | None:
    """The eligible peer with the highest valid median rate for `workload`."""
    rated = [(fig, p) for p in run.brokers if eligible(p) if (fig := median_figure(run, p, workload)) is not None]
    return max(rated)[1] if rated else None


def _is_peer(broker: str) -> bool:
    """Any broker but Ottla (the A/A control and an earlier Ottla are Ottla too)."""
    return broker not in (OTTLA, CONTROL) and not broker.startswith(BASELINE_PREFIX)


def _against_best_peer(run: Run, workload: str, minimum: float, what: str) -> Target:
    """Ottla against the peer with the highest valid median rate for `workload`."""
    target = f"{workload}: {what}"
    best = _best_peer(run, workload, _is_peer)
    if best is None:
        return Target(workload, target, "no valid peer figure", NOT_JUDGED)
    ratio = median_ratio(run, workload, best)
    if ratio is None:
        return Target(workload, target, f"no round with valid figures of both Ottla and {best}", NOT_JUDGED)
    return Target(workload, target, f"{ratio:.2f}x {best}", _verdict(ratio >= minimum), ratio, best)


def _native_peer_targets(run: Run) -> list[Target]:
    """Issue 31: the transactional workloads at least the best native peer's rate,
    judged against the run's A/A spread."""
    rows = []
    spread = aa_spread(run)
    for workload in ("txn-produce-1000", "txn-produce-10"):
        if workload not in run.workloads:
            continue
        key, target = f"native {workload}", f"{workload}: >= {AT_LEAST_FASTEST_PEER}x the best native peer"
        best = _best_peer(run, workload, lambda broker: broker in NATIVE_PEERS)
        ratio = None if best is None else median_ratio(run, workload, best)
        if best is None or ratio is None:
            rows.append(Target(key, target, "no round with valid figures of Ottla and a native peer", NOT_JUDGED))
            continue
        rows.append(Target(key, target, f"{ratio:.2f}x {best} ({_noise_note(spread)})",
                           judged(ratio, AT_LEAST_FASTEST_PEER, True, spread), ratio, best))
    return rows


def targets(run: Run) -> list[Target]:
    """A row for each target whose workloads ran."""
    rows: list[Target] = []
    ran = set(run.workloads)
    # Issue 15's bars (the old 80 %-of-idempotent one is retired: the peers are the bar).
    for workload in ("idempotent-produce", "idempotent-produce-1KiB"):
        if workload in ran:
            rows.append(_against_best_peer(run, workload, WITHIN_BEST_PEER, "within 5 % of the best peer (>= 0.95x)"))
    for workload in ("txn-produce-1000", "txn-produce-10"):
        if workload in ran:
            rows.append(_against_best_peer(run, workload, AT_LEAST_FASTEST_PEER, ">= 1.0x the best peer"))
    for workload in ("consume", "read-committed-consume", "parallel-produce"):
        if workload in ran:
            rows.append(_against_best_peer(run, workload, AT_LEAST_FASTEST_PEER, ">= 1.0x the fastest peer"))
    if "produce-latency" in ran:
        target = "produce-latency: p99 within 2x noida-db's"
        ratio = median_ratio(run, "produce-latency", "noida-db") if "noida-db" in run.brokers else None
        rows.append(Target("produce-latency", target, "n/a" if ratio is None else f"{ratio:.2f}x noida-db",
                           NOT_JUDGED if ratio is None else _verdict(ratio <= P99_OF_NOIDA), ratio))
    rows += _native_peer_targets(run)
    rows += _round_trip_targets(run)
    rows += _kafka_targets(run)
    rows += _control_rows(run)
    rows += _baseline_rows(run)
    rows += _coordinator_load_targets(run)
    rows += _many_partitions_targets(run)
    rows += _many_clients_targets(run)
    rows += _scale_targets(run)
    rows += _memory_targets(run)
    return rows


def _round_trip_targets(run: Run) -> list[Target]:
    """One row per request: each has the bar of its own."""
    if not run.round_trips:
        return []
    ottla = run.round_trips[0]
    noida = next((r for r in run.round_trips[1:] if r.broker == "noida-db"), None)
    spread = aa_spread(run, round_trips=True)
    rows = []
    for name in ROUND_TRIP_REQUESTS:
        target = f"round trip, {name}: p50 within {ROUND_TRIP_TARGET}x noida-db's"
        ours = ottla.percentile(name, 0.5)
        if noida is None:
            rows.append(Target(f"round-trip {name}", target, f"{ours * 1e6:,.0f} us; noida-db did not run",
                               NOT_JUDGED))
            continue
        ratio = session_ratio(ottla, noida, name)
        rows.append(Target(f"round-trip {name}", target,
                           f"{ratio:.2f}x noida-db ({ours * 1e6:,.0f} / {noida.percentile(name, 0.5) * 1e6:,.0f} us; "
                           f"{_noise_note(spread)})", judged(ratio, ROUND_TRIP_TARGET, False, spread), ratio))
    return rows


# Issue 31's bars against Apache Kafka.
KAFKA_THROUGHPUT = 1.0  # every throughput workload at least Kafka's
KAFKA_P50 = 1.0  # per-request p50 no higher than Kafka's
KAFKA_START = 0.1  # start-to-ready at most a tenth of Kafka's
KAFKA_MEMORY = 0.2  # resident memory at most a fifth of Kafka's


def aa_spread(run: Run, round_trips: bool = False) -> float | None:
    """The run's A/A spread: how far Ottla/ottla-2 (the same code) strayed from 1.0 at
    worst, over the throughput and latency workloads, or with `round_trips` over the
    round trips' requests; None where the control did not run."""
    if round_trips:
        control = next((r for r in run.round_trips or [] if r.broker == CONTROL), None)
        ratios = [session_ratio(run.round_trips[0], control, name) for name in ROUND_TRIP_REQUESTS] if control else []
    elif CONTROL in run.brokers:
        ratios = [r for w in run.workloads if (r := median_ratio(run, w, CONTROL)) is not None]
    else:
        ratios = []
    return max(abs(r - 1) for r in ratios) if ratios else None


def judged(ratio: float, bar: float, higher_is_better: bool, spread: float | None) -> str:
    """MET if `ratio` clears `bar` by more than `spread` (relative to the bar), MISSED if it
    falls short by more, WITHIN_NOISE in between; without a spread, on the bar alone."""
    margin = ratio / bar - 1 if higher_is_better else bar / ratio - 1
    if not spread:
        return _verdict(margin >= 0)
    return MET if margin > spread else MISSED if margin < -spread else WITHIN_NOISE


def _noise_note(spread: float | None) -> str:
    return "no A/A in this run" if spread is None else f"A/A spread ±{spread:.0%}"


def _kafka_targets(run: Run) -> list[Target]:
    """Issue 31: Ottla against Apache Kafka 4.3.1, where Kafka ran."""
    rows: list[Target] = []
    spread = aa_spread(run)
    note = _noise_note(spread)
    if KAFKA in run.brokers:
        for workload in run.workloads:
            if WORKLOADS[workload].latency:
                ratio = median_of([ours.p50_ms / theirs.p50_ms for r, ours in run.rounds[OTTLA][workload].items()
                                 if (theirs := run.rounds[KAFKA][workload].get(r)) is not None
                                 and not ours.invalid and not theirs.invalid and ours.p50_ms and theirs.p50_ms])
                target = f"{workload}: p50 no higher than Kafka's"
                bar, higher = KAFKA_P50, False
            else:
                ratio = median_ratio(run, workload, KAFKA)
                target = f"{workload}: >= {KAFKA_THROUGHPUT}x Kafka"
                bar, higher = KAFKA_THROUGHPUT, True
            key = f"kafka {workload}"
            if ratio is None:
                reason = run.failures[KAFKA].get(workload, "no round with valid figures of both")
                rows.append(Target(key, target, f"n/a ({reason})", NOT_JUDGED, against=KAFKA))
            else:
                rows.append(Target(key, target, f"{ratio:.2f}x kafka ({note})", judged(ratio, bar, higher, spread),
                                   ratio, KAFKA))
    rows += _kafka_round_trip_targets(run)
    rows += _kafka_many_clients_targets(run, spread)
    rows += _kafka_start_targets(run, spread)
    rows += _kafka_memory_targets(run, spread)
    return rows


def _kafka_round_trip_targets(run: Run) -> list[Target]:
    kafka = next((r for r in run.round_trips or [] if r.broker == KAFKA), None)
    if kafka is None:
        return []
    ottla, spread = run.round_trips[0], aa_spread(run, round_trips=True)
    rows = []
    for name in ROUND_TRIP_REQUESTS:
        ratio = session_ratio(ottla, kafka, name)
        rows.append(Target(f"kafka round-trip {name}", f"round trip, {name}: p50 no higher than Kafka's",
                           f"{ratio:.2f}x kafka ({ottla.percentile(name, 0.5) * 1e6:,.0f} / "
                           f"{kafka.percentile(name, 0.5) * 1e6:,.0f} us; {_noise_note(spread)})",
                           judged(ratio, KAFKA_P50, False, spread), ratio, KAFKA))
    return rows


def _kafka_many_clients_targets(run: Run, spread: float | None) -> list[Target]:
    clients, note = run.many_clients, _noise_note(spread)
    if clients is None:
        return []
    rows = []
    if clients.producers is not None and KAFKA in clients.producers:
        target = f"{clients.connections:,} concurrent producer connections: >= {KAFKA_THROUGHPUT}x Kafka"
        ratio = producers_ratio(clients.producers, KAFKA)
        rows.append(Target("kafka many-producers", target, "no round with figures of both" if ratio is None
                           else f"{ratio:.2f}x kafka ({note})",
                           NOT_JUDGED if ratio is None else judged(ratio, KAFKA_THROUGHPUT, True, spread), ratio,
                           KAFKA))
    if clients.consumer is not None and (KAFKA, clients.group_partitions) in clients.consumer:
        target = (f"a consumer of {clients.group_partitions:,} partitions in one group: >= {KAFKA_THROUGHPUT}x "
                  "Kafka's rate")
        ours = consumer_figures(clients.consumer, OTTLA, clients.group_partitions)
        theirs = consumer_figures(clients.consumer, KAFKA, clients.group_partitions)
        if ours is None or theirs is None:
            rows.append(Target("kafka group-consumer", target, "no figures of both", NOT_JUDGED, against=KAFKA))
        else:
            ratio = ours.many / theirs.many
            rows.append(Target("kafka group-consumer", target,
                               f"{ratio:.2f}x kafka ({ours.many:,.0f} / {theirs.many:,.0f} records/s; {note})",
                               judged(ratio, KAFKA_THROUGHPUT, True, spread), ratio, KAFKA))
    return rows


def _kafka_start_targets(run: Run, spread: float | None) -> list[Target]:
    rows = []
    for starts, size in ((run.starts, ""), (run.starts_many, " many")):
        if starts and OTTLA in starts and KAFKA in starts:
            rows += _kafka_start_rows(starts[OTTLA], starts[KAFKA], size, spread)
    return rows


def _kafka_start_rows(ours: Any, theirs: Any, size: str, spread: float | None) -> list[Target]:
    rows = []
    for kind, what in (("clean", "after a clean stop"), ("crashed", "after kill -9")):
        target = f"{ours.partitions:,} partitions, start-to-ready {what}: at most {KAFKA_START}x Kafka's"
        mine, kafka = getattr(ours, kind), getattr(theirs, kind)
        key = f"kafka start{size} {kind}"
        if not mine or not kafka:
            rows.append(Target(key, target, f"n/a ({theirs.failure or 'no figures'})", NOT_JUDGED, against=KAFKA))
            continue
        a, b = statistics.median(mine), statistics.median(kafka)
        rows.append(Target(key, target, f"{a / b:.3f}x kafka ({a:.2f} / {b:.2f} s; {_noise_note(spread)})",
                           judged(a / b, KAFKA_START, False, spread), a / b, KAFKA))
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
                pairs[f"group-consumer ({partitions:,})"] = (max(ok[OTTLA]), max(ok[KAFKA]))
    return pairs


def memory_spread(run: Run) -> float | None:
    """The A/A spread of resident memory: how far Ottla's peak strayed from ottla-2's at
    worst over the workloads both ran (the highest over the rounds each); None without
    ottla-2's figures."""
    ratios = [max(run.memory[w]) / max(rss) for w, rss in run.control_memory.items() if rss and run.memory.get(w)]
    return max(abs(r - 1) for r in ratios) if ratios else None


def _kafka_memory_targets(run: Run, spread: float | None) -> list[Target]:
    pairs = kafka_memory_ratios(run)
    if not pairs:
        return []
    # Memory has an A/A of its own where ottla-2 ran the workloads: the throughput's
    # spread says nothing about how much two resident sizes of the same code differ.
    spread = memory_spread(run) if run.control_memory else spread
    worst = max(pairs, key=lambda case: pairs[case][0] / pairs[case][1])
    ours, theirs = pairs[worst]
    return [Target("kafka rss", f"resident memory at most {KAFKA_MEMORY}x Kafka's in every case measured on both",
                   f"at worst {ours / theirs:.2f}x kafka ({worst}: {ours:.0f} / {theirs:.0f} MiB), of {len(pairs)}; "
                   f"{_noise_note(spread)}", judged(ours / theirs, KAFKA_MEMORY, False, spread), ours / theirs,
                   KAFKA)]


def _control_rows(run: Run) -> list[Target]:
    """Ottla/ottla-2 wherever the A/A control ran: two brokers of the same code, so any
    distance from 1.0 is the noise of this machine and harness, in this run."""
    rows = []
    if CONTROL in run.brokers:
        for workload in run.workloads:
            ratio = median_ratio(run, workload, CONTROL)
            if ratio is not None:
                rows.append(Target(f"A/A {workload}", f"{workload}: Ottla/{CONTROL}, the same code (1.0 without noise)",
                                   f"{ratio:.2f}x", NOISE, ratio, kind=CONTROL_RATIO))
    control = next((r for r in run.round_trips or [] if r.broker == CONTROL), None)
    if control is not None:
        ottla = run.round_trips[0]
        for name in ROUND_TRIP_REQUESTS:
            ratio = session_ratio(ottla, control, name)
            rows.append(Target(f"A/A round-trip {name}", f"round trip, {name}: Ottla/{CONTROL} p50 "
                               "(1.0 without noise)", f"{ratio:.2f}x", NOISE, ratio, kind=CONTROL_RATIO))
    return rows


def _baseline_rows(run: Run) -> list[Target]:
    """Ottla against ottla@REV (`--baseline`), the same workloads on an earlier commit: a
    change keeps its promise of making nothing slower where the ratio is met or within
    the run's A/A spread; missed means slower by more than the spread."""
    rows = []
    spread = aa_spread(run)
    for peer in run.brokers:
        if not peer.startswith(BASELINE_PREFIX):
            continue
        for workload in run.workloads:
            ratio = median_ratio(run, workload, peer)
            if ratio is None:
                continue
            higher = not WORKLOADS[workload].latency  # a latency's figure is a time: lower is better
            rows.append(Target(f"{peer} {workload}", f"{workload}: no slower than {peer}",
                               f"{ratio:.2f}x {peer} ({_noise_note(spread)})", judged(ratio, 1.0, higher, spread),
                               ratio, peer))
    return rows


def _coordinator_load_targets(run: Run) -> list[Target]:
    load = run.coordinator_load
    if load is None:
        return []
    return [Target("coordinator-load ready",
                   f"start-up after {load.transactions:,} transactions and {load.commits:,} offset commits: ready "
                   f"under {READY_TARGET:g} s, coordinators loading in the background",
                   f"ready {load.ready_seconds:.2f} s; a produce at ready acknowledged +{load.produce_seconds:.3f} s; "
                   f"coordinators loaded {load.loaded_seconds:.2f} s",
                   _verdict(load.ready_seconds < READY_TARGET), load.ready_seconds, kind=ABSOLUTE)]


def _many_partitions_targets(run: Run) -> list[Target]:
    starts = run.many_partitions
    if starts is None:
        return []
    what = f"{starts.partitions:,} partitions"
    median = statistics.median
    clean = median([s.seconds for s in starts.clean])
    clean_cpu = median([s.cpu_seconds for s in starts.clean])
    crashed = median([s.seconds for s in starts.crashed])
    crashed_cpu = median([s.cpu_seconds for s in starts.crashed])
    rss = max(s.rss for s in [*starts.clean, *starts.crashed])
    return [
        Target("many-partitions clean start", f"{what}: start after a clean shutdown under {CLEAN_START_SECONDS:g} s",
               f"{clean:.2f} s to ready (CPU {clean_cpu:.2f} s), median of {len(starts.clean)}",
               _verdict(clean < CLEAN_START_SECONDS), clean, kind=ABSOLUTE),
        Target("many-partitions RSS", f"{what}: resident memory at ready under {RSS_LIMIT // MIB} MiB",
               f"{rss / MIB:.0f} MiB at the peak", _verdict(rss < RSS_LIMIT), rss / MIB, kind=ABSOLUTE),
        Target("many-partitions kill -9 start", f"{what}: start after kill -9, as fast as Kafka's rules allow",
               f"{crashed:.2f} s to ready (CPU {crashed_cpu:.2f} s), median of {len(starts.crashed)}", REPORTED,
               crashed, kind=ABSOLUTE),
    ]


def _many_clients_targets(run: Run) -> list[Target]:
    clients = run.many_clients
    if clients is None:
        return []
    # Issue 31's bars, judged against the throughput workloads' A/A spread, as the
    # same runs are against Kafka (no second Ottla runs them).
    spread = aa_spread(run)
    rows = []
    if clients.producers is not None:
        target = (f"{clients.connections:,} concurrent producer connections: at least {TARGET_PRODUCERS}x "
                  "noida-db's aggregate")
        ratio = producers_ratio(clients.producers)
        if ratio is None:
            rows.append(Target("many-producers", target, "no round with figures of both Ottla and noida-db",
                               NOT_JUDGED))
        else:
            rates = {name: median_rate(outcomes) for name, outcomes in clients.producers.items()}
            rows.append(Target("many-producers", target,
                               f"{ratio:.2f}x noida-db ({rates['Ottla']:,.0f} / {rates['noida-db']:,.0f} records/s; "
                               f"{_noise_note(spread)})", judged(ratio, TARGET_PRODUCERS, True, spread), ratio))
    if clients.consumer is not None:
        target = (f"a consumer of {clients.group_partitions:,} partitions in one group: at least "
                  f"{GROUP_CONSUMER_TARGET}x the single-partition rate")
        figures = consumer_figures(clients.consumer, OTTLA, clients.group_partitions)
        if figures is None:
            rows.append(Target("group-consumer", target, "no figures", NOT_JUDGED))
        else:
            rows.append(Target("group-consumer", target,
                               f"{figures.ratio:.2f}x ({figures.many:,.0f} / {figures.one:,.0f} records/s; "
                               f"{_noise_note(spread)})", judged(figures.ratio, GROUP_CONSUMER_TARGET, True, spread),
                               figures.ratio))
    return rows


def _scale_targets(run: Run) -> list[Target]:
    start = f"start-up after a clean shutdown under {CLEAN_START_SECONDS:.0f} s ({PARTITIONS:,} partitions)"
    recovery = "start-up after kill -9: recovery proportional to the unflushed tail, not to the data size"
    rss = f"broker RSS under {RSS_LIMIT // MIB} MiB whatever the data size"
    keys = ("scale clean start", "scale recovery", "scale RSS")
    if run.scale_skipped:
        return [Target(key, target, "not measured (see Scale above)", NOT_JUDGED)
                for key, target in zip(keys, (start, recovery, rss), strict=True)]
    if run.scale is None:
        return []
    half, full = run.scale.half, run.scale.full
    extra_half = half.recovery_start_seconds - half.clean_start_seconds
    extra_full = full.recovery_start_seconds - full.clean_start_seconds
    rss_max = max(full.rss_after_write or 0, full.rss_after_read or 0)
    return [
        Target(keys[0], start, f"{full.clean_start_seconds:.2f} s with {full.data_bytes / GIB:.2f} GiB",
               _verdict(full.clean_start_seconds < CLEAN_START_SECONDS), full.clean_start_seconds, kind=ABSOLUTE),
        Target(keys[1], recovery,
               f"beyond a clean start: {extra_full:.2f} s with {full.data_bytes / GIB:.2f} GiB, {extra_half:.2f} s "
               f"with half (same {TAIL_BYTES // MIB} MiB tail; met if at most {RECOVERY_GROWTH}x + "
               f"{RECOVERY_SLACK_SECONDS} s)",
               _verdict(extra_full <= RECOVERY_GROWTH * extra_half + RECOVERY_SLACK_SECONDS), extra_full,
               kind=ABSOLUTE),
        Target(keys[2], rss,
               f"{(full.rss_after_write or 0) / MIB:.0f} MiB after writing, {(full.rss_after_read or 0) / MIB:.0f} "
               f"MiB after reading {full.data_bytes / GIB:.2f} GiB",
               _verdict(rss_max < RSS_LIMIT), rss_max / MIB, kind=ABSOLUTE),
    ]


def memory_peaks(run: Run) -> dict[str, float]:
    """Ottla's peak resident memory in MiB in each workload that ran (the highest over its
    rounds): VmHWM, reset before each workload; the many-clients cases sample VmRSS every
    quarter second and the scale run reads it after writing and after reading."""
    peaks = {w: max(rss) / MIB for w, rss in run.memory.items() if rss}
    if run.round_trips and run.round_trips[0].rss_peak:
        peaks["round-trips"] = run.round_trips[0].rss_peak / MIB
    if run.coordinator_load is not None:
        peaks["coordinator-load"] = run.coordinator_load.rss_bytes / MIB
    if run.many_partitions is not None:
        for kind, starts in (("clean", run.many_partitions.clean), ("after kill -9", run.many_partitions.crashed)):
            if starts:
                peaks[f"many-partitions ({kind})"] = max(s.rss for s in starts) / MIB
    if run.many_clients is not None:
        peaks.update(run.many_clients.rss_peaks())
    if run.scale is not None:
        scale_rss = max(run.scale.full.rss_after_write or 0, run.scale.full.rss_after_read or 0)
        if scale_rss:
            peaks[f"scale ({run.scale.full.data_bytes / GIB:.2f} GiB)"] = scale_rss / MIB
    return peaks


def memory_lines(run: Run) -> list[str]:
    peaks = memory_peaks(run)
    if not peaks:
        return []
    lines = ["Ottla's peak resident memory per workload, MiB (the highest over the rounds): "
             + ", ".join(f"{workload} {mib:.0f}" for workload, mib in peaks.items()) + "."]
    pairs = kafka_memory_ratios(run)
    if pairs:
        lines += ["", "Ottla's against Kafka's (the JVM's VmHWM, -Xmx1G -Xms1G), MiB: "
                  + ", ".join(f"{case} {ours:.0f} / {theirs:.0f}" for case, (ours, theirs) in pairs.items()) + "."]
    return lines


def _memory_targets(run: Run) -> list[Target]:
    peaks = memory_peaks(run)
    if not peaks:
        return []
    worst = max(peaks, key=lambda workload: peaks[workload])
    return [Target("rss", f"resident memory under {RSS_LIMIT // MIB} MiB in every workload",
                   f"at most {peaks[worst]:.0f} MiB ({worst}), of {len(peaks)} measured",
                   _verdict(peaks[worst] < RSS_LIMIT // MIB), peaks[worst], kind=ABSOLUTE)]


def targets_table(run: Run) -> str:
    rows = [[t.target, t.measured, t.verdict] for t in targets(run)]
    return markdown_table(["target", "measured", "verdict"], rows, numbers=False) if rows else ""


def targets_record(run: Run, **about: Any) -> dict[str, Any]:
    """The targets as JSON-ready data, with `about` (when, the command, the commit...)."""
    return {**about, "targets": [dataclasses.asdict(t) for t in targets(run)]}
