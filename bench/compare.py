"""Whether a run reproduces another (issue 15: "an independent side-by-side run of these
workloads reproduces the ratios within the noise band (±5%)").

`python -m bench` writes each run's targets with their figures (a ratio, seconds or
MiB) to bench/runs/<start>.json. This sets two of them side by side, target by target:
the figure in each and the second's difference from the first. What the issue asks to
reproduce is the ratios: a ratio agrees if it is within the band (a ratio to the best
peer compares only if both runs chose the same peer). A time or a size (seconds to
ready, MiB) agrees if its verdict is the same in both runs, its change shown beside it.
The A/A rows (Ottla against ottla-2, the same code) are each run's own noise: shown, and
summed up at the end, but no target. Exit code 1 if any target does not agree or is
missing from one run.

    python -m bench.compare                  # the last two runs in bench/runs/
    python -m bench.compare OLD.json NEW.json [--band 0.05]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from typing import Any

from .report import markdown_table
from .targets import ABSOLUTE, CONTROL_RATIO, RATIO

RUNS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs")
NOISE_BAND = 0.05
AGREE, DIFFER, NO_FIGURE = "agree", "**differ**", "no figure to compare"
# (targets.NOISE is the A/A rows' verdict in a run; this is how compare marks those rows.)
SAME_VERDICT, OTHER_VERDICT, A_A_ROW = "same verdict", "**verdict differs**", "noise (A/A)"


def agreement(old: dict[str, Any] | None, new: dict[str, Any] | None, band: float) -> tuple[str, str]:
    """(the second's difference from the first, AGREE / DIFFER / why not compared) for
    one target's entries of two runs (None: the target is not in that run)."""
    if old is None or new is None:
        return "", f"{DIFFER}: only in the {'second' if old is None else 'first'} run"
    if old.get("figure") is None or new.get("figure") is None:
        return "", NO_FIGURE
    if old.get("against", "") != new.get("against", ""):
        return "", f"{DIFFER}: to {old['against'] or 'no peer'} in one run, {new['against'] or 'no peer'} in the other"
    change = "" if old["figure"] == 0 else f"{new['figure'] / old['figure'] - 1:+.1%}"
    kind = _kind(new)  # runs written before kinds existed hold ratios only
    if kind == ABSOLUTE:
        return change, SAME_VERDICT if old["verdict"] == new["verdict"] else OTHER_VERDICT
    if kind == CONTROL_RATIO:
        return change, A_A_ROW
    if old["figure"] == 0:
        return "", AGREE if new["figure"] == 0 else DIFFER
    return change, AGREE if abs(new["figure"] / old["figure"] - 1) <= band else DIFFER


def _kind(entry: dict[str, Any]) -> str:
    return entry.get("kind", RATIO)


def noise_band(run: dict[str, Any]) -> tuple[float, float] | None:
    """The lowest and highest A/A ratio of a run (Ottla/ottla-2), None if it had none."""
    figures = [t["figure"] for t in run["targets"] if _kind(t) == CONTROL_RATIO and t.get("figure") is not None]
    return (min(figures), max(figures)) if figures else None


def compare(old: dict[str, Any], new: dict[str, Any], band: float = NOISE_BAND) -> list[list[str]]:
    """Rows of target, figure and verdict in each run, difference, agreement; the first
    run's targets in its order, then any only the second has."""
    before = {t["key"]: t for t in old["targets"]}
    after = {t["key"]: t for t in new["targets"]}
    rows = []
    for key in [*before, *(k for k in after if k not in before)]:
        a, b = before.get(key), after.get(key)
        change, verdict = agreement(a, b, band)
        rows.append([key, _shown(a), _shown(b), change, verdict])
    return rows


def _shown(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "-"
    figure = "n/a" if entry.get("figure") is None else f"{entry['figure']:.3g}"
    return f"{figure} {entry['against']} ({entry['verdict']})" if entry.get("against") else \
        f"{figure} ({entry['verdict']})"


def _load(path: str) -> dict[str, Any]:
    with open(path) as f:
        return json.load(f)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", metavar="RUN.json", help="two runs (default: the last two in bench/runs/)")
    parser.add_argument("--band", type=float, default=NOISE_BAND, help="the noise band (default %(default)s: ±5%%)")
    args = parser.parse_args(argv)
    paths = args.runs or sorted(glob.glob(os.path.join(RUNS_DIR, "*.json")))[-2:]
    if len(paths) != 2:
        parser.error(f"two runs are needed; found {len(paths)} ({', '.join(paths) or 'none'} in {RUNS_DIR})")
    old, new = (_load(path) for path in paths)
    for label, path, run in (("first", paths[0], old), ("second", paths[1], new)):
        print(f"{label}: {os.path.relpath(path)}: {run.get('started', '?')}, `{run.get('command', '?')}`, "
              f"Ottla at {run.get('ottla', '?')}")
    rows = compare(old, new, args.band)
    print()
    print(markdown_table(["target", "first", "second", "change", f"agree (ratios within ±{args.band:.0%})"], rows,
                         numbers=False))
    ratios = [row for row in rows if row[4] in (AGREE, NO_FIGURE) or row[4].startswith(DIFFER)]
    absolute = [row for row in rows if row[4] in (SAME_VERDICT, OTHER_VERDICT)]
    differing = [row[0] for row in rows if row[4] not in (AGREE, NO_FIGURE, SAME_VERDICT, A_A_ROW)]
    print()
    print(f"Ratios: {sum(row[4] in (AGREE, NO_FIGURE) for row in ratios)} of {len(ratios)} agree within "
          f"±{args.band:.0%}. Times and sizes: {sum(row[4] == SAME_VERDICT for row in absolute)} of {len(absolute)} "
          f"keep their verdict." + (f" Differing: {', '.join(differing)}." if differing else ""))
    for label, run in (("first", old), ("second", new)):
        band = noise_band(run)
        if band is not None:
            print(f"The {label} run's A/A ratios (Ottla/ottla-2, the same code): {band[0]:.2f}x to {band[1]:.2f}x.")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
