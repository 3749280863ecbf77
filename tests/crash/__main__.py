"""python -m tests.crash: the crash-consistency harness at any size (see harness.py).

The states are spread over several recordings (a new run of the workload every
`--states-per-recording`): each run interleaves the clients, the flushes and the
checkpoints differently, so more of the moments a crash can come at are covered than by
cutting one recording thousands of times."""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from .harness import Report, StateResult, explore, record
from .recording import remove_tree


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.crash")
    parser.add_argument("--states", type=int, default=2000, help="crash states to check")
    parser.add_argument("--states-per-recording", type=int, default=250)
    parser.add_argument("--scale", type=int, default=1, help="workload length, a multiple of the test's")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2, help="crash states checked at once")
    parser.add_argument("--no-fsync", action="store_true", help="the default mode: report what it loses")
    parser.add_argument("--workdir", help="where recordings and violating states are kept (default: a temp dir)")
    parser.add_argument("--state-dir", help="where each state is written and checked (default: /dev/shm if there)")
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="ottla-crash-")
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    state_dir = tempfile.mkdtemp(prefix="ottla-crash-states-", dir=args.state_dir or shm)
    started = time.monotonic()
    reports: list[Report] = []
    done = 0
    recordings = max(1, -(-args.states // args.states_per_recording))
    for n in range(recordings):
        count = args.states // recordings + (1 if n < args.states % recordings else 0)
        recorded = record(os.path.join(workdir, f"recording-{n}"), fsync=not args.no_fsync, scale=args.scale)
        print(f"recording {n + 1} of {recordings}: {len(recorded.recording.ops)} operations, "
              f"{len(recorded.acks.times())} acknowledgements, in {workdir}/recording-{n}", flush=True)

        def progress(state: StateResult) -> None:
            nonlocal done
            done += 1
            mark = "VIOLATION " + "; ".join(state.violations[:3]) if state.violations else "ok"
            rate = done / (time.monotonic() - started)
            print(f"[{done}/{args.states}, {rate:.2f}/s] cut #{state.cut} {state.kind} "
                  f"undecided={state.undecided} lost={state.lost}: {mark}", flush=True)

        report = explore(recorded, os.path.join(workdir, f"recording-{n}"), count, args.seed + n, progress,
                         jobs=args.jobs, state_dir=state_dir)
        print(report.summary(), flush=True)
        reports.append(report)
    remove_tree(state_dir)
    print(Report.totals(reports, time.monotonic() - started))
    # (Without --fsync, losing the unflushed tail is counted, not a violation.)
    raise SystemExit(1 if any(report.violating for report in reports) else 0)


if __name__ == "__main__":
    main()
