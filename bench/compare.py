"""Whether a run reproduces another (issue 15: "an independent side-by-side run of these
workloads reproduces the ratios within the noise band (±5%)").

`python -m bench` writes each run's targets with their figures (a ratio, seconds or
MiB) to bench/runs/<start>.json. This sets two of them side by side, target by target:
the figure in each, the second's difference from the first, and whether they agree
within the band. A ratio to the best peer compares only if both runs chose the same
peer. Exit code 1 if any target differs beyond the band or is missing from one run.

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

RUNS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs")
NOISE_BAND = 0.05
AGREE, DIFFER, NO_FIGURE = "agree", "**differ**", "no figure to compare"


def agreement(old: dict[str, Any] | None, new: dict[str, Any] | None, band: float) -> tuple[str, str]:
    """(the second's difference from the first, AGREE / DIFFER / why not compared) for
    one target's entries of two runs (None: the target is not in that run)."""
    if old is None or new is None:
        return "", f"{DIFFER}: only in the {'second' if old is None else 'first'} run"
    if old.get("figure") is None or new.get("figure") is None:
        return "", NO_FIGURE
    if old.get("against", "") != new.get("against", ""):
        return "", f"{DIFFER}: to {old['against'] or 'no peer'} in one run, {new['against'] or 'no peer'} in the other"
    if old["figure"] == 0:
        return "", AGREE if new["figure"] == 0 else DIFFER
    change = new["figure"] / old["figure"] - 1
    return f"{change:+.1%}", AGREE if abs(change) <= band else DIFFER


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
    print(markdown_table(["target", "first", "second", "change", f"within ±{args.band:.0%}"], rows, numbers=False))
    differing = [row[0] for row in rows if row[4] not in (AGREE, NO_FIGURE)]
    print()
    print(f"{len(rows) - len(differing)} of {len(rows)} targets agree within ±{args.band:.0%}"
          + (f"; differing: {', '.join(differing)}" if differing else ""))
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
