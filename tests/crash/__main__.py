"""python -m tests.crash: the crash-consistency harness at any size (see harness.py)."""

from __future__ import annotations

import argparse
import tempfile

from .harness import explore, record


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.crash")
    parser.add_argument("--states", type=int, default=2000, help="crash states to check")
    parser.add_argument("--scale", type=int, default=1, help="workload length, a multiple of the test's")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-fsync", action="store_true", help="the default mode: report what it loses")
    parser.add_argument("--workdir", help="where recordings and violating states are kept (default: a temp dir)")
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="ottla-crash-")
    recorded = record(workdir, fsync=not args.no_fsync, scale=args.scale)
    print(f"recorded {len(recorded.recording.ops)} operations in {workdir}", flush=True)

    def progress(state) -> None:
        mark = "VIOLATION " + "; ".join(state.violations[:3]) if state.violations else "ok"
        print(f"cut #{state.cut} {state.kind} undecided={state.undecided} lost={state.lost}: {mark}", flush=True)

    report = explore(recorded, workdir, args.states, args.seed, progress)
    print(report.summary())
    raise SystemExit(1 if report.violating and not args.no_fsync else 0)


if __name__ == "__main__":
    main()
