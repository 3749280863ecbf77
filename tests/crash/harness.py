"""The crash-consistency harness: record a workload, build crash states, check each.

    python -m tests.crash --states 3000 --jobs 2   # make soak / make crash-soak: thousands
    python -m tests.crash --states 40 --no-fsync   # the default mode: what it may lose

`make test` runs a bounded share (tests/crash/test_crash_consistency.py). A state costs
about half a second: written to /dev/shm, Ottla forked from a process that has imported
it (forked.py), checked over the protocol by one client (workload.check).
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from ottla.testing import BrokerProcess

from . import workload
from .recording import (
    TRUNCATE,
    WRITE,
    Baseline,
    Chooser,
    Op,
    Recording,
    State,
    keep_at_random,
    keep_data_not_names,
    keep_everything,
    keep_names_not_data,
    keep_nothing,
    read_ops,
    remove_tree,
    shim_environment,
)


@dataclass
class Recorded:
    recording: Recording
    acks: workload.Acks
    properties: dict[str, str]
    fsync: bool


def record(workdir: str, fsync: bool, scale: int = 1) -> Recorded:
    """Prepare a data directory (topics, a clean shutdown), then run the workload
    against a broker on it with every file operation recorded, and kill it."""
    properties = dict(workload.BROKER_PROPERTIES, **{"fsync.on.ack": "true" if fsync else "false"})
    data_dir = os.path.join(workdir, "recorded")
    broker = BrokerProcess(data_dir, properties)
    broker.start()
    try:
        workload.prepare(broker)
    finally:
        assert broker.stop() == 0, broker.log()[-2000:]
    baseline = Baseline.take(data_dir)
    log_path = os.path.join(workdir, "fs.log")
    broker = BrokerProcess(data_dir, properties, env=shim_environment(data_dir, log_path))
    broker.start()
    try:
        acks = workload.run(broker.bootstrap, scale)
    finally:
        broker.kill()
    return Recorded(Recording(baseline, read_ops(log_path)), acks, properties, fsync)


# The crash states' kinds: which operations not yet durable each keeps. "one-file" is
# made per state (see one_file).
def choosers(rng: random.Random) -> list[tuple[str, Chooser | None]]:
    return [("only-durable", keep_nothing), ("one-file", None), ("names-not-data", keep_names_not_data),
            ("random", keep_at_random(rng)), ("data-not-names", keep_data_not_names), ("one-file", None),
            ("random", keep_at_random(rng)), ("all", keep_everything)]


def one_file(recording: Recording, cut: int, rng: random.Random) -> Chooser:
    """Everything not yet durable of one file (its bytes) or one directory (its
    entries), picked at random, and nothing else: the disk wrote back that one and no
    other, which is how one file's state gets ahead of another's it depends on (a
    coordinator's record of a transaction complete, without its markers)."""
    targets = sorted({op.file if op.kind in (WRITE, TRUNCATE) else op.dir for op in recording.undecided(cut)})
    if not targets:
        return keep_nothing
    target = rng.choice(targets)

    def choose(op: Op) -> int | None:
        if op.kind in (WRITE, TRUNCATE):
            return op.length if op.kind == WRITE and op.file == target else 0 if op.file == target else None
        return 0 if op.dir == target or op.dir2 == target else None

    return choose


@dataclass
class StateResult:
    cut: int
    crash_ns: int
    kind: str
    undecided: int
    violations: list[str]
    lost: int
    aborted_shown: int = 0


@dataclass
class Report:
    fsync: bool
    ops: int
    acks: int
    states: list[StateResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def violating(self) -> list[StateResult]:
        return [s for s in self.states if s.violations]

    def summary(self) -> str:
        lost = [s.lost for s in self.states]
        lines = [f"{'--fsync' if self.fsync else 'default mode'}: {self.ops} operations recorded, "
                 f"{self.acks} acknowledgements, {len(self.states)} crash states in {self.seconds:.0f} s, "
                 f"{len(self.violating)} with violations; acknowledged records lost per state: "
                 f"max {max(lost, default=0)}, total {sum(lost)}"
                 + _aborted_shown(self.states)]
        for state in self.violating[:10]:
            lines.append(f"  cut #{state.cut} ({state.kind}, {state.undecided} undecided operations): "
                         + "; ".join(state.violations[:5]))
        return "\n".join(lines)

    @staticmethod
    def totals(reports: list[Report], seconds: float) -> str:
        """The figures of several recordings' runs, for bench/RESULTS.md."""
        states = [s for report in reports for s in report.states]
        kinds: dict[str, int] = {}
        for state in states:
            kinds[state.kind] = kinds.get(state.kind, 0) + 1
        lost = [s.lost for s in states]
        return (f"in all: {len(reports)} recordings, {sum(r.ops for r in reports)} operations recorded, "
                f"{sum(r.acks for r in reports)} acknowledgements, {len(states)} crash states "
                f"({', '.join(f'{n} {kind}' for kind, n in sorted(kinds.items()))}) in {seconds:.0f} s "
                f"({len(states) / max(seconds, 1e-9):.2f} a second), "
                f"{sum(len(r.violating) for r in reports)} with violations; acknowledged records lost per "
                f"state: max {max(lost, default=0)}, total {sum(lost)}, in {sum(1 for n in lost if n)} states"
                + _aborted_shown(states))


def _aborted_shown(states: list[StateResult]) -> str:
    shown = sum(s.aborted_shown for s in states)
    if not shown:
        return ""
    return (f"; aborted transactions shown whose ABORT marker the crash took (a later commit's marker closed "
            f"their records): {shown} in {sum(1 for s in states if s.aborted_shown)} states")


def cuts(recorded: Recorded, count: int, rng: random.Random) -> list[int]:
    """`count` crash moments (CLOCK_MONOTONIC times), half right after acknowledgements
    (where the most must hold), half right after an operation anywhere (mid-flush,
    mid-roll, mid-checkpoint: where the most is undecided)."""
    times = recorded.acks.times()
    ops = recorded.recording.ops
    chosen = rng.sample(times, min((count + 1) // 2, len(times)))
    while len(chosen) < count:
        chosen.append(ops[rng.randrange(len(ops))].time_ns)
    return sorted(chosen)


def explore(recorded: Recorded, workdir: str, count: int, seed: int = 1,
            progress: Callable[[StateResult], None] | None = None, jobs: int = 1,
            state_dir: str | None = None) -> Report:
    """Build `count` crash states of `recorded` and check each (workload.check), `jobs`
    at a time. The states are built here in turn (the same seed, the same states, in
    any number of jobs) and written under `state_dir` (default `workdir`: a tmpfs is
    cheaper, the fsyncs of the broker recovering them cost nothing there and the model,
    not the disk, says what a crash keeps); a violating one is moved to `workdir` with
    its decisions."""
    rng = random.Random(seed)
    kinds = choosers(rng)
    state_dir = state_dir or workdir
    started = time.monotonic()
    report = Report(recorded.fsync, len(recorded.recording.ops), len(recorded.acks.times()))
    recording = recorded.recording
    results: dict[int, StateResult] = {}

    def checked(i: int, kind: str, crash_ns: int, cut: int, state: State,
                decisions: list[tuple[Op, int | None]]) -> StateResult:
        path = os.path.join(state_dir, f"state-{i}")
        remove_tree(path)
        state.materialize(path)
        flushed = workload.flushed_values(recording.crash_state(cut, keep_nothing).contents())
        found = workload.check(path, recorded.acks, crash_ns, recorded.properties,
                               require_acknowledged=recorded.fsync, flushed=flushed)
        result = StateResult(recording.ops[cut].seq if cut >= 0 else 0, crash_ns, kind,
                             len(recording.undecided(cut)), found.violations, found.lost, found.aborted_shown)
        if found.violations:
            # Kept for a look: the state as the crash left it (the checked copy has been
            # recovered), and what was undecided at the cut and whether it was kept.
            kept = os.path.join(workdir, f"state-{i}")
            if kept != path:
                remove_tree(kept)
                shutil.move(path, kept)
                shutil.move(path + ".broker.log", kept + ".broker.log")
            state.materialize(kept + "-as-crashed")
            with open(kept + ".ops.txt", "w") as f:
                f.write(f"{kind} crash after #{result.cut}: " + "; ".join(found.violations) + "\n")
                for op, n in decisions:
                    outcome = "lost" if n is None else f"kept {n} bytes of" if op.kind == WRITE else "kept"
                    f.write(f"{outcome} {op}\n")
        else:
            remove_tree(path)
            if os.path.exists(path + ".broker.log"):
                os.unlink(path + ".broker.log")
        return result

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        pending: set[Future[StateResult]] = set()
        index: dict[Future[StateResult], int] = {}

        def collect(done: set[Future[StateResult]]) -> None:
            for future in done:
                results[index.pop(future)] = result = future.result()
                if progress is not None:
                    progress(result)

        for i, crash_ns in enumerate(cuts(recorded, count, rng)):
            kind, chosen = kinds[i % len(kinds)]
            cut = recording.cut_at_time(crash_ns)
            chooser = chosen if chosen is not None else one_file(recording, cut, rng)
            decisions: list[tuple[Op, int | None]] = []
            state = recording.crash_state(cut, chooser, decisions)
            if len(pending) >= jobs:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                collect(done)
            future = pool.submit(checked, i, kind, crash_ns, cut, state, decisions)
            index[future] = i
            pending.add(future)
        collect(wait(pending)[0])
    report.states = [results[i] for i in sorted(results)]
    report.seconds = time.monotonic() - started
    return report
