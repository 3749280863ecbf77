"""The targets of issues 3, 6, 15, 31, 39 and 45, each judged on the figures of one run (a
Run of bench/report.py), as the table at the end of a run and bench/runs/<start>.json
give them. Each row names the issue whose bar it is; where a later issue changed a bar
(1,000 producer connections: issue 31's 0.9x noida-db, issue 45's 1.0x) the row has the
later bar, and where two issues ask the same ("31, 45") there is one row.

Issue 31's and 45's targets are set against Apache Kafka (the peer `kafka`: bench/kafka_targets.py)
and against the best native peer (NATIVE_PEERS: brokers that keep their data, not
librdkafka's mock cluster, which issue 6's "best peer" includes), and are judged against
the run's own A/A spread (bench/verdicts.py). Instructions per request (callgrind) and
times to ready are judged on their bar alone: an instruction count does not move with the
machine's load, and a time to ready has no A/A of its own.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from typing import Any

from . import ci_loop
from .client import WORKLOADS
from .coordinator_load import READY_TARGET
from .kafka_targets import kafka_memory_ratios, kafka_targets
from .many_clients import TARGET_CONSUMER as GROUP_CONSUMER_TARGET
from .many_clients import TARGET_PRODUCERS, consumer_figures, median_rate, producers_ratio
from .peers import BASELINE_PREFIX, CONTROL, KAFKA
from .report import OTTLA, Run, markdown_table, median_figure, median_ratio
from .request_instructions import FLOOR_REQUEST, FLOOR_TARGET, INSTRUCTIONS_OF_PEER, TARGET_REQUESTS
from .round_trips import REQUESTS as ROUND_TRIP_REQUESTS
from .round_trips import TARGET as ROUND_TRIP_TARGET
from .round_trips import session_ratio
from .scale import GIB, MIB, PARTITIONS, TAIL_BYTES
from .starts import EMPTY_READY_SECONDS
from .verdicts import (
    ABSOLUTE,
    CONTROL_RATIO,
    MET,
    MISSED,
    NOISE,
    NOT_JUDGED,
    RATIO,
    REPORTED,
    WITHIN_NOISE,
    Target,
    aa_spread,
    judged,
    noise_note,
    verdict,
)

__all__ = ["ABSOLUTE", "CONTROL_RATIO", "MET", "MISSED", "NOT_JUDGED", "RATIO", "REPORTED", "WITHIN_NOISE", "Target",
           "aa_spread", "judged", "memory_lines", "targets", "targets_record", "targets_table"]

# Targets of issues 6 and 15, each judged on the ratios of one run.
WITHIN_BEST_PEER = 0.95  # idempotent produce: within 5 % of the best peer
AT_LEAST_FASTEST_PEER = 1.0  # transactional produce, consume, parallel producers
# Issue 31's "native peers": brokers that keep their data, as Ottla does. librdkafka's mock
# cluster holds everything in memory and is left out of them (not of issue 6's best peer).
NATIVE_PEERS = ("noida-db", "tansu")
P99_OF_NOIDA = 2.0  # latency: p99 within 2x noida-db's
TXN_10_OF_NOIDA = 1.0  # issue 45: txn-produce-10 at least noida-db's rate
CLEAN_START_SECONDS = 2.0
RSS_LIMIT = 300 * MIB
# kill -9: the recovery's cost beyond a clean start at the full size may be at most this
# many times the one at half the size (a recovery that checks all the data doubles it),
# plus RECOVERY_SLACK_SECONDS for timing noise.
RECOVERY_GROWTH = 1.5
RECOVERY_SLACK_SECONDS = 0.25


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
        return Target(workload, target, "no valid peer figure", NOT_JUDGED, issue="6, 15")
    ratio = median_ratio(run, workload, best)
    if ratio is None:
        return Target(workload, target, f"no round with valid figures of both Ottla and {best}", NOT_JUDGED,
                      issue="6, 15")
    return Target(workload, target, f"{ratio:.2f}x {best}", verdict(ratio >= minimum), ratio, best, issue="6, 15")


def _why_no_peer(run: Run, workload: str, names: tuple[str, ...]) -> str:
    """Why none of `names` has a figure for `workload`: each one's failure, or its absence."""
    reasons = [f"{name}: {run.failures[name].get(workload, 'no valid round')}" for name in names if name in run.brokers]
    return "; ".join(reasons) if reasons else f"none of {', '.join(names)} in this run"


def _native_peer_targets(run: Run) -> list[Target]:
    """Issue 45 (issue 31 for the transactional workloads): every throughput workload at
    least the best native peer's rate, and txn-produce-10 at least noida-db's, judged
    against the run's A/A spread."""
    rows = []
    spread = aa_spread(run)
    for workload in run.workloads:
        if WORKLOADS[workload].latency:
            continue
        issue = "31, 45" if workload in ("txn-produce-1000", "txn-produce-10") else "45"
        key, target = f"native {workload}", f"{workload}: >= {AT_LEAST_FASTEST_PEER}x the best native peer"
        best = _best_peer(run, workload, lambda broker: broker in NATIVE_PEERS)
        ratio = None if best is None else median_ratio(run, workload, best)
        if best is None or ratio is None:
            rows.append(Target(key, target, f"n/a ({_why_no_peer(run, workload, NATIVE_PEERS)})", NOT_JUDGED,
                               issue=issue))
        else:
            rows.append(Target(key, target, f"{ratio:.2f}x {best} ({noise_note(spread)})",
                               judged(ratio, AT_LEAST_FASTEST_PEER, True, spread), ratio, best, issue=issue))
    if "txn-produce-10" in run.workloads:
        # Named on its own by issue 45: the best native peer's row may be tansu's.
        target = f"txn-produce-10: >= {TXN_10_OF_NOIDA}x noida-db"
        ratio = median_ratio(run, "txn-produce-10", "noida-db") if "noida-db" in run.brokers else None
        if ratio is None:
            rows.append(Target("noida-db txn-produce-10", target,
                               f"n/a ({_why_no_peer(run, 'txn-produce-10', ('noida-db',))})", NOT_JUDGED,
                               against="noida-db", issue="45"))
        else:
            rows.append(Target("noida-db txn-produce-10", target, f"{ratio:.2f}x noida-db ({noise_note(spread)})",
                               judged(ratio, TXN_10_OF_NOIDA, True, spread), ratio, "noida-db", issue="45"))
    return rows


def targets(run: Run) -> list[Target]:
    """A row for each target whose workloads ran."""
    rows: list[Target] = []
    ran = set(run.workloads)
    # Issue 15's bars against the best peer, the mock included (the old 80 %-of-idempotent
    # one is retired: the peers are the bar).
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
                           NOT_JUDGED if ratio is None else verdict(ratio <= P99_OF_NOIDA), ratio, issue="6, 15"))
    rows += _instruction_targets(run)
    rows += _native_peer_targets(run)
    rows += _round_trip_targets(run)
    rows += kafka_targets(run)
    rows += _empty_start_targets(run)
    rows += _ci_loop_targets(run)
    rows += _second_core_rows(run)
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
                               NOT_JUDGED, issue="31, 45"))
            continue
        ratio = session_ratio(ottla, noida, name)
        rows.append(Target(f"round-trip {name}", target,
                           f"{ratio:.2f}x noida-db ({ours * 1e6:,.0f} / {noida.percentile(name, 0.5) * 1e6:,.0f} us; "
                           f"{noise_note(spread)})", judged(ratio, ROUND_TRIP_TARGET, False, spread), ratio,
                           issue="31, 45"))
    return rows


def _instruction_targets(run: Run) -> list[Target]:
    """Issue 45: each request's instructions (callgrind, the least of the rounds) at most
    INSTRUCTIONS_OF_PEER times noida-db's, where noida-db's could be counted, and the
    pipeline's floor (Heartbeat) at most FLOOR_TARGET. Judged on the bar alone: an
    instruction count does not move with the machine's load."""
    counts = run.instructions
    if counts is None:
        return []
    rows = []
    for name in TARGET_REQUESTS:
        target = f"instructions, {name}: at most {INSTRUCTIONS_OF_PEER:g}x noida-db's"
        ours = counts.ottla.get(name)
        theirs = counts.peer.get(name)
        if ours is None:
            rows.append(Target(f"instructions {name}", target, f"Ottla not measured ({counts.ottla_missing or '-'})",
                               NOT_JUDGED, issue="45"))
        elif theirs is None:
            why = counts.peer_missing.get(name, "not measured in this run")
            rows.append(Target(f"instructions {name}", target, f"Ottla {ours[1]:,}; noida-db: no figure ({why})",
                               NOT_JUDGED, issue="45"))
        else:
            ratio = ours[1] / theirs
            rows.append(Target(f"instructions {name}", target,
                               f"{ratio:.2f}x noida-db (Ottla {ours[1]:,}, least of {counts.rounds}; noida-db "
                               f"{theirs:,.0f}, {counts.peer_method})", verdict(ratio <= INSTRUCTIONS_OF_PEER), ratio,
                               "noida-db", issue="45"))
    floor = counts.ottla.get(FLOOR_REQUEST)
    target = f"instructions, the pipeline's floor ({FLOOR_REQUEST}): at most {FLOOR_TARGET:,} (half of 90k)"
    if floor is None:
        rows.append(Target("instructions floor", target, f"not measured ({counts.ottla_missing or '-'})", NOT_JUDGED,
                           kind=ABSOLUTE, issue="45"))
    else:
        rows.append(Target("instructions floor", target, f"{floor[1]:,} (least of {counts.rounds}; median "
                           f"{floor[0]:,.0f})", verdict(floor[1] <= FLOOR_TARGET), floor[1], kind=ABSOLUTE,
                           issue="45"))
    return rows


def _empty_start_targets(run: Run) -> list[Target]:
    """Issue 45: `ottla serve` on an empty data directory ready in well under half a second."""
    times = run.starts_empty
    if not times:
        return []
    median = statistics.median(times)
    return [Target("empty start", f"an empty data directory, exec to ready: under {EMPTY_READY_SECONDS:g} s",
                   f"{median:.3f} s, median of {len(times)} (least {min(times):.3f}, most {max(times):.3f})",
                   verdict(median < EMPTY_READY_SECONDS), median, kind=ABSOLUTE, issue="45")]


def _ci_loop_targets(run: Run) -> list[Target]:
    """Issue 45 (issue 39's bars): each step the broker bounds at most Kafka's median time,
    the whole test at most 0.8x Kafka's. A step every broker takes about the same time in
    (within ci_loop.CLIENT_BOUND_SPREAD) is the client's: reported, not judged, where
    Ottla's is the higher. No A/A runs the CI loop: the bar alone decides."""
    loop = run.ci_loop
    if loop is None:
        return []
    rows = []
    for step in [*ci_loop.STEPS, None]:
        name = "whole test" if step is None else step
        bar = ci_loop.WHOLE_TARGET if step is None else 1.0
        target = (f"CI loop, whole test: at most {bar:g}x Kafka's" if step is None
                  else f"CI loop, {step}: at most Kafka's")
        issue = "39" if step is None else "39, 45"
        ours, theirs = ci_loop.median_seconds(loop, OTTLA, step), ci_loop.median_seconds(loop, KAFKA, step)
        if ours is None or theirs is None:
            why = loop.failures.get(OTTLA if ours is None else KAFKA, "no figure")
            rows.append(Target(f"ci-loop {name}", target, f"n/a ({why})", NOT_JUDGED, against=KAFKA, issue=issue))
            continue
        ratio = ours / theirs
        measured = f"{ratio:.2f}x kafka ({ours:.3f} / {theirs:.3f} s)"
        outcome = verdict(ratio <= bar)
        if outcome == MISSED and step is not None and ci_loop.is_client_bound(loop, step):
            measured += f"; every broker within {ci_loop.CLIENT_BOUND_SPREAD:.0%}: the client's time"
            outcome = "client-bound (not judged)"
        rows.append(Target(f"ci-loop {name}", target, measured, outcome, ratio, KAFKA, issue=issue))
    return rows


def _second_core_rows(run: Run) -> list[Target]:
    """Issue 45, the second core: the broker's CPU per workload, on the event loop's thread
    and in its other threads (Run.cpu, filled by the module that measures it). The issue
    asks for the figures before and after, no bar: reported."""
    if not run.workloads:
        return []
    if run.cpu is None:
        return [Target("second core", "the second core: the broker's CPU per workload, the event loop's thread "
                       "and the others", "not measured in this run (Run.cpu)", NOT_JUDGED, issue="45")]
    rows = []
    for workload, (loop_seconds, other_seconds) in run.cpu.items():
        total = loop_seconds + other_seconds
        share = f"{other_seconds / total:.0%}" if total else "-"
        rows.append(Target(f"second core {workload}", f"{workload}: the broker's CPU, event loop and other threads",
                           f"{total:.2f} s: loop {loop_seconds:.2f} s, other threads {other_seconds:.2f} s ({share})",
                           REPORTED, other_seconds / total if total else None, kind=ABSOLUTE, issue="45"))
    return rows


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
                               f"{ratio:.2f}x {peer} ({noise_note(spread)})", judged(ratio, 1.0, higher, spread),
                               ratio, peer, issue="45"))
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
                   verdict(load.ready_seconds < READY_TARGET), load.ready_seconds, kind=ABSOLUTE, issue="15")]


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
               verdict(clean < CLEAN_START_SECONDS), clean, kind=ABSOLUTE, issue="15"),
        Target("many-partitions RSS", f"{what}: resident memory at ready under {RSS_LIMIT // MIB} MiB",
               f"{rss / MIB:.0f} MiB at the peak", verdict(rss < RSS_LIMIT), rss / MIB, kind=ABSOLUTE, issue="15"),
        Target("many-partitions kill -9 start", f"{what}: start after kill -9, as fast as Kafka's rules allow",
               f"{crashed:.2f} s to ready (CPU {crashed_cpu:.2f} s), median of {len(starts.crashed)}", REPORTED,
               crashed, kind=ABSOLUTE, issue="15"),
    ]


def _many_clients_targets(run: Run) -> list[Target]:
    clients = run.many_clients
    if clients is None:
        return []
    # Issue 45's bar for the producers (1.0x noida-db; issue 31 asked 0.9x), issue 31's
    # for the consumer, judged against the throughput workloads' A/A spread, as the same
    # runs are against Kafka (no second Ottla runs them).
    spread = aa_spread(run)
    rows = []
    if clients.producers is not None:
        target = (f"{clients.connections:,} concurrent producer connections: at least {TARGET_PRODUCERS}x "
                  "noida-db's aggregate")
        ratio = producers_ratio(clients.producers)
        if ratio is None:
            rows.append(Target("many-producers", target, "no round with figures of both Ottla and noida-db",
                               NOT_JUDGED, issue="45"))
        else:
            rates = {name: median_rate(outcomes) for name, outcomes in clients.producers.items()}
            rows.append(Target("many-producers", target,
                               f"{ratio:.2f}x noida-db ({rates['Ottla']:,.0f} / {rates['noida-db']:,.0f} records/s; "
                               f"{noise_note(spread)})", judged(ratio, TARGET_PRODUCERS, True, spread), ratio,
                               issue="45"))
    if clients.consumer is not None:
        target = (f"a consumer of {clients.group_partitions:,} partitions in one group: at least "
                  f"{GROUP_CONSUMER_TARGET}x the single-partition rate")
        figures = consumer_figures(clients.consumer, OTTLA, clients.group_partitions)
        if figures is None:
            rows.append(Target("group-consumer", target, "no figures", NOT_JUDGED, issue="31"))
        else:
            rows.append(Target("group-consumer", target,
                               f"{figures.ratio:.2f}x ({figures.many:,.0f} / {figures.one:,.0f} records/s; "
                               f"{noise_note(spread)})", judged(figures.ratio, GROUP_CONSUMER_TARGET, True, spread),
                               figures.ratio, issue="31"))
    return rows


def _scale_targets(run: Run) -> list[Target]:
    start = f"start-up after a clean shutdown under {CLEAN_START_SECONDS:.0f} s ({PARTITIONS:,} partitions)"
    recovery = "start-up after kill -9: recovery proportional to the unflushed tail, not to the data size"
    rss = f"broker RSS under {RSS_LIMIT // MIB} MiB whatever the data size"
    keys = ("scale clean start", "scale recovery", "scale RSS")
    if run.scale_skipped:
        return [Target(key, target, "not measured (see Scale above)", NOT_JUDGED, issue="3")
                for key, target in zip(keys, (start, recovery, rss), strict=True)]
    if run.scale is None:
        return []
    half, full = run.scale.half, run.scale.full
    extra_half = half.recovery_start_seconds - half.clean_start_seconds
    extra_full = full.recovery_start_seconds - full.clean_start_seconds
    rss_max = max(full.rss_after_write or 0, full.rss_after_read or 0)
    return [
        Target(keys[0], start, f"{full.clean_start_seconds:.2f} s with {full.data_bytes / GIB:.2f} GiB",
               verdict(full.clean_start_seconds < CLEAN_START_SECONDS), full.clean_start_seconds, kind=ABSOLUTE,
               issue="3"),
        Target(keys[1], recovery,
               f"beyond a clean start: {extra_full:.2f} s with {full.data_bytes / GIB:.2f} GiB, {extra_half:.2f} s "
               f"with half (same {TAIL_BYTES // MIB} MiB tail; met if at most {RECOVERY_GROWTH}x + "
               f"{RECOVERY_SLACK_SECONDS} s)",
               verdict(extra_full <= RECOVERY_GROWTH * extra_half + RECOVERY_SLACK_SECONDS), extra_full,
               kind=ABSOLUTE, issue="3"),
        Target(keys[2], rss,
               f"{(full.rss_after_write or 0) / MIB:.0f} MiB after writing, {(full.rss_after_read or 0) / MIB:.0f} "
               f"MiB after reading {full.data_bytes / GIB:.2f} GiB",
               verdict(rss_max < RSS_LIMIT), rss_max / MIB, kind=ABSOLUTE, issue="3"),
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
                   verdict(peaks[worst] < RSS_LIMIT // MIB), peaks[worst], kind=ABSOLUTE,
                   issue="3")]


def targets_table(run: Run) -> str:
    rows = [[t.target, t.issue or "-", t.measured, t.verdict] for t in targets(run)]
    return markdown_table(["target", "issue", "measured", "verdict"], rows, numbers=False) if rows else ""


def targets_record(run: Run, **about: Any) -> dict[str, Any]:
    """The targets as JSON-ready data, with `about` (when, the command, the commit...)."""
    return {**about, "targets": [dataclasses.asdict(t) for t in targets(run)]}
