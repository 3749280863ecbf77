"""How a target is judged on the figures of one run: the row every target gives (Target),
its verdicts, and the run's own A/A spread that a ratio must clear (bench/targets.py and
bench/kafka_targets.py hold the targets themselves).

A ratio is met only where it clears its bar by more than the run's A/A spread (how far
Ottla/ottla-2, the same code, strayed from 1.0 in this run; for resident memory, how far
Ottla's peak strayed from ottla-2's), missed only where it falls short by more, and
"within noise" in between. Without the control the bar alone decides.
"""

from __future__ import annotations

from dataclasses import dataclass

from .peers import CONTROL
from .report import Run, median_ratio
from .round_trips import REQUESTS as ROUND_TRIP_REQUESTS
from .round_trips import session_ratio

MET, MISSED, NOT_JUDGED, REPORTED = "met", "**missed**", "not judged", "reported (no numeric bar)"
WITHIN_NOISE = "within noise"
NOISE = "the run's noise (no bar)"
# What a target's figure is, for bench.compare: the issue asks the ratios to reproduce
# within the noise band; a time or a size is compared by its verdict.
RATIO, ABSOLUTE, CONTROL_RATIO = "ratio", "absolute", "A/A"


@dataclass
class Target:
    """One row of the targets table. `key` names the target the same way in every run
    and `figure` is its number (a ratio, seconds, MiB or instructions), so that
    bench.compare can set two runs side by side; `issue` names the issue(s) whose bar
    it is ("31, 45": the same bar in both)."""
    key: str
    target: str
    measured: str
    verdict: str
    figure: float | None = None
    against: str = ""  # the peer a ratio is to, where the best peer is chosen per run
    kind: str = RATIO  # RATIO, ABSOLUTE (seconds, MiB, instructions) or CONTROL_RATIO (Ottla/ottla-2)
    issue: str = ""


def verdict(met: bool) -> str:
    return MET if met else MISSED


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


def memory_spread(run: Run) -> float | None:
    """The A/A spread of resident memory: how far Ottla's peak strayed from ottla-2's at
    worst over the workloads both ran (the highest over the rounds each); None without
    ottla-2's figures."""
    ratios = [max(run.memory[w]) / max(rss) for w, rss in run.control_memory.items() if rss and run.memory.get(w)]
    return max(abs(r - 1) for r in ratios) if ratios else None


def judged(ratio: float, bar: float, higher_is_better: bool, spread: float | None) -> str:
    """MET if `ratio` clears `bar` by more than `spread` (relative to the bar), MISSED if it
    falls short by more, WITHIN_NOISE in between; without a spread, on the bar alone."""
    margin = ratio / bar - 1 if higher_is_better else bar / ratio - 1
    if not spread:
        return verdict(margin >= 0)
    return MET if margin > spread else MISSED if margin < -spread else WITHIN_NOISE


def noise_note(spread: float | None) -> str:
    return "no A/A in this run" if spread is None else f"A/A spread ±{spread:.0%}"
