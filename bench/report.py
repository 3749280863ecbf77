"""The results: the table printed at the end of a run and the section written to RESULTS.md.

`Results` maps broker name -> workload name -> round index -> Measurement; a broker has
an entry for a round only if the whole round succeeded on it.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import statistics
import subprocess

import confluent_kafka

from .client import Measurement

Results = dict[str, dict[str, dict[int, Measurement]]]

MB = 1_000_000
RESULTS_TITLE = "# Benchmark results"
RESULTS_INTRO = (
    "Written by `make bench` (`python -m bench`; `--no-write` leaves this file alone). Each workload\n"
    "runs in a confluent-kafka client process of its own; the brokers run in rounds, interleaved\n"
    "(Ottla, noida-db, Ottla, ...), each round on a fresh broker and fresh topic. Figures are\n"
    "medians over the rounds; MB = 10^6 bytes of message values; the ratio is the median of the\n"
    "per-round ratios Ottla/noida-db. The newest run comes first."
)
RUN_HEADING = "## Run of "
EARLIER_HEADING = "## Earlier runs"


def rate(m: Measurement) -> float:
    return m.messages / m.seconds


def mb_rate(m: Measurement) -> float:
    return m.bytes / MB / m.seconds


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{suffix}"


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table padded to line up in a terminal too; the first column left-aligned,
    the others right-aligned."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]

    def line(cells: list[str]) -> str:
        padded = [cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(cells, widths))]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join("-" * (w + 1) + (":" if i else "-") for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


def results_table(results: Results, brokers: list[str], workloads: list[str], baseline: str) -> str:
    """One row per workload: median msgs/s and MB/s of each broker, then for each broker
    other than `baseline`, the median over the rounds of baseline/broker."""
    others = [b for b in brokers if b != baseline]
    header = ["workload"]
    for broker in brokers:
        header += [f"{broker} msgs/s", f"{broker} MB/s"]
    header += [f"{baseline}/{other}" for other in others]
    rows = []
    for workload in workloads:
        row = [workload]
        for broker in brokers:
            runs = list(results[broker][workload].values())
            row += [_fmt(_median([rate(m) for m in runs]), ",.0f"), _fmt(_median([mb_rate(m) for m in runs]), ".2f")]
        for other in others:
            ours, theirs = results[baseline][workload], results[other][workload]
            ratios = [rate(ours[r]) / rate(theirs[r]) for r in ours.keys() & theirs.keys()]
            row.append(_fmt(_median(ratios), ".2f", "x"))
        rows.append(row)
    return _markdown_table(header, rows)


def per_round_lines(results: Results, brokers: list[str], workloads: list[str]) -> list[str]:
    """msgs/s of every round, to show the spread behind the medians."""
    lines = []
    for workload in workloads:
        parts = []
        for broker in brokers:
            runs = results[broker][workload]
            figures = " / ".join(f"{rate(runs[r]):,.0f}" for r in sorted(runs)) or "none"
            parts.append(f"{broker} {figures}")
        lines.append(f"- {workload} (msgs/s per round): " + "; ".join(parts))
    return lines


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


def _ottla_revision(root: str) -> str:
    """The commit the broker ran from, and whether its sources had uncommitted changes."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "broker", "protocol", "storage", "coordinator"],
                               cwd=root, capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown commit"
    return f"commit {commit}" + (" with uncommitted changes" if dirty else "")


def _package(name: str) -> str:
    try:
        return f"{name} {importlib.metadata.version(name)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{name} not installed"


def machine_lines(root: str) -> list[str]:
    return [
        f"- Machine: {len(os.sched_getaffinity(0))} CPUs (nproc), {_cpu_model()}, {_ram_gib()} RAM",
        f"- Python {platform.python_version()}, {_package('confluent-kafka')}, "
        f"librdkafka {confluent_kafka.libversion()[0]}, {_package('noida-db')}",
        f"- Ottla at {_ottla_revision(root)}",
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
    if start >= 0:
        previous = head[start + 1:]
    elif head.startswith("# "):  # someone else's file: keep all but its title
        previous = head.partition("\n")[2]
    else:
        previous = head
    moved = "\n\n".join(part.strip() for part in [_demote(previous.strip()), earlier] if part.strip())
    text = f"{RESULTS_TITLE}\n\n{RESULTS_INTRO}\n\n{section.strip()}\n"
    if moved:
        text += f"\n{EARLIER_HEADING}\n\n{moved}\n"
    with open(path, "w") as f:
        f.write(text)
