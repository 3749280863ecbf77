"""`python -m bench` (what `make bench` runs): Ottla against Apache Kafka 4.3.1, noida-db,
tansu and librdkafka's mock cluster in interleaved rounds, then Ottla's scale run.

Each round starts a fresh broker, runs the selected workloads of bench.client.WORKLOADS
in order against it, each in a client subprocess, and stops the broker. Rounds alternate
the brokers (Ottla, kafka, noida-db, ottla-2, tansu, mock, Ottla, ...) so that drift of the
machine over the run (other load, thermal state) falls on all alike. ottla-2 is a second
Ottla of the same code, the A/A control: its ratio to Ottla is the run's own noise. A
peer that is missing, or fails a workload, gets "n/a (reason)" for it and the run goes on; a workload a peer
failed is not run on it again in later rounds (a failure is usually a timeout, which
would cost the same again). Ottla failing a workload, or producing a figure that is not
valid, ends the workload rounds; Ottla failing any later step ends that step. Either way
the other steps run, what was measured is written with a note of the failure, and the
exit code is 1.

Runs of their own follow: the CI loop, one integration test step by step on Ottla, Kafka
and noida-db (bench.ci_loop), SASL_SSL against PLAINTEXT (bench.security), one request at
a time next to Kafka and noida-db (bench.round_trips), the instructions each request costs
Ottla, each `--baseline` revision and noida-db under callgrind (bench.instruction_counts,
`--instruction-rounds`), start-to-ready next to Kafka, clean and after kill -9, with 1,000
partitions, and a first start on an empty data directory (bench.starts), start-up after a
long coordinator history
(bench.coordinator_load), 10,000 partitions starting clean and after kill -9
(bench.many_partitions), 1,000 producer connections next to Kafka and noida-db and one group
consumer of 1,000 partitions against 1, Ottla's and Kafka's (bench.many_clients: its producers and its
consumer) and, last, the scale run (bench.scale); `--only NAME` runs one alone and
`--scale-gib` sets the scale run's data size. The many-partitions and many-clients runs
take min(--rounds, 3) rounds: each round is several fresh brokers.

Ottla's and Kafka's peak resident memory (VmHWM) is read after each workload. At the end, one
targets table judges every target of issues 3, 6, 15, 31, 39 and 45 that ran, each row
naming its issue (bench/targets.py); it goes into the run's section of bench/RESULTS.md,
and the targets with their figures into bench/runs/<start>.json, which
`python -m bench.compare` sets beside an earlier run's.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

from . import cpu_split
from .ci_loop import ci_loop_lines, run_ci_loop
from .client import WORKLOADS, Workload
from .coordinator_load import coordinator_load_lines, run_coordinator_load
from .instruction_counts import InstructionCounts, instruction_lines, instructions_problem, run_instructions
from .many_clients import many_clients_lines, run_many_clients
from .many_partitions import many_partitions_lines, run_many_partitions
from .peers import (
    BASELINE_PREFIX,
    CONTROL,
    KAFKA,
    Ottla,
    Peer,
    baseline_peer,
    baseline_python,
    cpu_halves,
    peak_resident,
    peers,
    reset_peak_resident,
)
from .report import (
    OTTLA,
    RUN_HEADING,
    Run,
    machine_lines,
    ottla_revision,
    per_round_lines,
    scale_lines,
    tables,
    write_results,
)
from .round_trips import SESSIONS, round_trip_lines, run_round_trips
from .scale import GIB, free_disk_problem, run_scale
from .security import run_security, security_lines
from .starts import EMPTY_RUNS, MANY_RECORDS, empty_start_lines, run_starts, starts_lines, time_empty_starts
from .starts import MANY_PARTITIONS as MANY_STARTS
from .targets import memory_lines, targets_record, targets_table
from .workloads import Measurement

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_PATH = os.path.join(ROOT, "bench", "RESULTS.md")
RUNS_DIR = os.path.join(ROOT, "bench", "runs")
CLIENT_GRACE = 30.0  # seconds past its own deadline before a client process is killed
SCALE = "scale"
SECURITY = "security"
COORDINATOR_LOAD = "coordinator-load"
ROUND_TRIPS = "round-trips"
INSTRUCTIONS = "instructions"
INSTRUCTION_WARMUP = 3  # rounds before the measured ones, each broker
STARTS = "starts"
MANY_PARTITIONS = "many-partitions"
MANY_PRODUCERS = "many-producers"
GROUP_CONSUMER = "group-consumer"
CI_LOOP = "ci-loop"
CI_LOOP_PEERS = ("kafka", "noida-db")  # of --peers, the ones the CI loop runs beside Ottla
EXTRAS = (CI_LOOP, SECURITY, ROUND_TRIPS, INSTRUCTIONS, STARTS, COORDINATOR_LOAD, MANY_PARTITIONS, MANY_PRODUCERS,
          GROUP_CONSUMER, SCALE)  # runs of their own, in the order they run
EXTRA_ROUNDS = 3  # at most, for many-partitions and many-clients: the minimum


class WorkloadFailed(Exception):
    pass


class OttlaFailed(Exception):
    pass


def run_client(workload: Workload, bootstrap: str, topic: str, args: argparse.Namespace) -> Measurement:
    cmd = [sys.executable, "-m", "bench.client", workload.name, "--bootstrap", bootstrap, "--topic", topic,
           "--messages", str(workload.messages(args.messages)), "--size", str(workload.size or args.size),
           "--timeout", str(args.timeout)]
    try:
        done = subprocess.run(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=args.timeout + CLIENT_GRACE)
    except subprocess.TimeoutExpired as exc:
        raise WorkloadFailed(f"the client did not exit within {exc.timeout:.0f} s") from exc
    if done.returncode != 0:
        # librdkafka's own log lines (starting with %) go to stderr too: the reason is the last other line.
        reasons = [line for line in done.stderr.strip().splitlines() if not line.startswith("%")]
        raise WorkloadFailed(reasons[-1] if reasons else f"the client exited with code {done.returncode}")
    return Measurement(**json.loads(done.stdout.strip().splitlines()[-1]))


def _describe(m: Measurement) -> str:
    if m.p99_ms is not None:
        text = f"p50 {m.p50_ms:.2f} ms, p99 {m.p99_ms:.2f} ms"
    else:
        text = f"{m.rate:>11,.0f} msgs/s ({m.seconds:.2f} s)"
    return text + (f"  NOT VALID: {m.invalid}" if m.invalid else "")


def run_round(name: str, make_peer: Callable[[], Peer], workloads: list[Workload], args: argparse.Namespace,
              run: Run, r: int) -> None:
    """Every workload not already failed against a fresh broker, stopped and removed afterwards."""
    label = f"round {r + 1}/{args.rounds}  {name:<9}"
    failures = run.failures[name]
    if all(workload.name in failures for workload in workloads):
        return
    peer = make_peer()
    try:
        try:
            peer.start()
        except RuntimeError as exc:
            if name == OTTLA:
                raise OttlaFailed(f"could not start: {exc}") from exc
            for workload in workloads:
                failures.setdefault(workload.name, f"the broker did not start in round {r + 1}")
            print(f"{label} could not start: {str(exc).splitlines()[0]}", flush=True)
            return
        topics: dict[str, str] = {}  # a workload's topic key -> the topic's name in this round
        for workload in workloads:
            if workload.name in failures:
                continue
            topic = topics.setdefault(workload.topic, f"bench-{workload.topic}-{uuid.uuid4().hex[:8]}")
            if name in (OTTLA, KAFKA, CONTROL):
                reset_peak_resident(peer.pid)
            cpu_before = cpu_split.sample(peer.pid) if name == OTTLA else None
            try:
                m = run_client(workload, peer.bootstrap, topic, args)
            except WorkloadFailed as exc:
                if name == OTTLA:
                    raise OttlaFailed(f"{workload.name}: {exc}\nOttla log, last lines:\n{peer.log_tail()}") from exc
                failures[workload.name] = f"failed in round {r + 1}: {exc}"
                print(f"{label} {workload.name:<24} n/a ({exc})", flush=True)
                if not peer.alive():
                    for rest in workloads:
                        failures.setdefault(rest.name, f"the broker exited in round {r + 1}, during {workload.name}")
                    print(f"{label} the broker exited:\n{peer.log_tail()}", flush=True)
                    return
                continue
            if m.invalid and name == OTTLA:
                raise OttlaFailed(f"{workload.name}: the figure is not valid: {m.invalid}")
            run.rounds[name][workload.name][r] = m
            if name == OTTLA:
                run.memory.setdefault(workload.name, []).append(peak_resident(peer.pid))
                if cpu_before is not None:  # the second core: how much ran beside the event loop
                    used = cpu_split.split(cpu_before, cpu_split.sample(peer.pid))
                    run.add_cpu(workload.name, used.loop, used.other)
            elif name == KAFKA:
                run.kafka_memory.setdefault(workload.name, []).append(peak_resident(peer.pid))
            elif name == CONTROL:
                run.control_memory.setdefault(workload.name, []).append(peak_resident(peer.pid))
            print(f"{label} {workload.name:<24} {_describe(m)}", flush=True)
    finally:
        peer.stop()


def _placement(pinned: bool) -> str:
    halves = cpu_halves() if pinned else None
    if halves is None:
        return "Brokers and clients where the scheduler put them" + ("" if pinned else " (--no-pin)")
    brokers, clients = (",".join(map(str, sorted(cpus))) for cpus in halves)
    return (f"The round trips' brokers pinned to CPU {brokers}, their client to CPU {clients}; everything else "
            "where the scheduler put it")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per broker (default %(default)s)")
    parser.add_argument("--messages", type=int, default=200_000,
                        help="messages per workload, scaled per workload (default %(default)s)")
    parser.add_argument("--size", type=int, default=100, help="bytes per message value (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds one workload may take before it counts as failed (default %(default)s)")
    parser.add_argument("--only", default="", metavar="NAME,NAME",
                        help=f"run only these: {', '.join([*WORKLOADS, *EXTRAS])} (default: all)")
    # ottla-2 (the A/A control) runs right after noida-db: its figures are a round further
    # from Ottla's than noida-db's, so the noise they show is not less than what the
    # comparison with noida-db sees.
    parser.add_argument("--peers", default="kafka,noida-db,ottla-2,tansu,mock", metavar="NAME,NAME",
                        help="peers to compare with, of kafka (Apache Kafka 4.3.1), noida-db, ottla-2 (a second Ottla: "
                             "the A/A control), tansu, mock (default %(default)s; '' for none)")
    parser.add_argument("--scale-gib", type=float, default=5.0,
                        help="GiB of data for the scale run (default %(default)s)")
    parser.add_argument("--round-trip-sessions", type=int, default=SESSIONS,
                        help="sessions of the round trips, each with fresh brokers (default %(default)s)")
    parser.add_argument("--instruction-rounds", type=int, default=20,
                        help="measured rounds of the instructions per request, Ottla's and noida-db's, after "
                             f"{INSTRUCTION_WARMUP} warm-up; the least is the figure (default %(default)s)")
    parser.add_argument("--no-pin", dest="pin", action="store_false",
                        help="leave the round trips' brokers and client where the scheduler puts them (default: "
                             "the brokers on one half of the CPUs, the client on the other)")
    parser.add_argument("--baseline", default="", metavar="REV,REV",
                        help="also run Ottla of these git revisions as peers, ottla@REV (each built once into "
                             ".cache/bench-baseline/): what a change did, against the run's A/A spread; the "
                             "instructions run counts each one's too (before and after)")
    parser.add_argument("--no-write", action="store_true", help="do not write bench/RESULTS.md nor bench/runs/")
    args = parser.parse_args(argv)
    only = [name for name in args.only.split(",") if name] or [*WORKLOADS, *EXTRAS]
    unknown = [name for name in only if name not in WORKLOADS and name not in EXTRAS]
    available = peers()
    chosen = [name for name in args.peers.split(",") if name]
    unknown += [name for name in chosen if name not in available]
    if unknown:
        parser.error(f"unknown: {', '.join(unknown)}")
    if args.rounds < 1 or args.messages < 1 or args.size < 2 or args.scale_gib <= 0 or args.instruction_rounds < 1:
        parser.error("--rounds, --messages, --instruction-rounds and --scale-gib must be positive, --size at least 2")

    started = datetime.datetime.now(datetime.UTC)
    clock = time.monotonic()
    load_before = os.getloadavg()[0]
    revision, fingerprint = ottla_revision(ROOT)
    notes: list[str] = []
    contenders: list[tuple[str, Callable[[], Peer]]] = [(OTTLA, Ottla)]
    for name in chosen:
        factory = available[name]
        if isinstance(factory, str):
            notes.append(f"{name} left out: {factory}")
        else:
            contenders.append((name, factory))
    contenders += [baseline_peer(revision) for revision in args.baseline.split(",") if revision]
    # (ottla@REV, its Python): the instructions run counts each earlier revision's too.
    baselines = [(f"{BASELINE_PREFIX}{short}", python) for short, python in
                 (baseline_python(revision) for revision in args.baseline.split(",") if revision)]
    workloads = [WORKLOADS[name] for name in WORKLOADS if name in only]
    run = Run([name for name, _ in contenders], [w.name for w in workloads])
    plan = [f"{args.rounds} rounds of {', '.join(run.workloads)} on {', '.join(run.brokers)}"] if workloads else []
    ci_loop_contenders = [(name, factory) for name, factory in contenders if name == OTTLA or name in CI_LOOP_PEERS]
    plan += [f"{args.rounds} rounds of the CI loop on {', '.join(n for n, _ in ci_loop_contenders)}"] \
        if CI_LOOP in only else []
    plan += ["SASL_SSL against PLAINTEXT"] if SECURITY in only else []
    plan += ["start-up after a long coordinator history"] if COORDINATOR_LOAD in only else []
    plan += ["one request at a time, Ottla, Kafka and noida-db"] if ROUND_TRIPS in only else []
    count_noida = "noida-db" in [name for name, _ in contenders]
    plan += [f"{args.instruction_rounds} rounds of instructions per request, Ottla"
             + (" and noida-db" if count_noida else "")] if INSTRUCTIONS in only else []
    extra_rounds = min(args.rounds, EXTRA_ROUNDS)
    plan += [f"{extra_rounds} rounds of start-to-ready, Ottla and Kafka, and {EMPTY_RUNS} empty starts"] \
        if STARTS in only else []
    plan += [f"{extra_rounds} rounds of 10,000 partitions starting, Ottla alone and next to Kafka"] \
        if MANY_PARTITIONS in only else []
    plan += [f"{extra_rounds} rounds of 1,000 producer connections"] if MANY_PRODUCERS in only else []
    plan += [f"{extra_rounds} rounds of a 1,000-partition group consumer"] if GROUP_CONSUMER in only else []
    plan += [f"scale with {args.scale_gib:g} GiB"] if SCALE in only else []
    print(f"{'; then '.join(plan)} (load average {load_before:.2f})", flush=True)

    failed: list[str] = []  # each step Ottla failed: the step ends there, the run goes on, the exit code is 1

    @contextlib.contextmanager
    def step(what: str) -> Iterator[None]:
        """One step of the run: Ottla failing it (or the step's own code failing) ends that
        step, with what it had measured kept, and the next step runs: a long run's other
        figures are not lost to one failure."""
        try:
            yield
        except Exception as exc:
            reason = str(exc) if isinstance(exc, OttlaFailed) else f"{what}: {type(exc).__name__}: {exc}"
            print(f"Ottla failed: {reason}", file=sys.stderr, flush=True)
            failed.append(reason.splitlines()[0])

    if workloads:
        with step("workloads"):
            for r in range(args.rounds):
                for name, make_peer in contenders:
                    run_round(name, make_peer, workloads, args, run, r)
    if CI_LOOP in only:
        with step("ci-loop"):
            run.ci_loop = run_ci_loop(args.rounds, ci_loop_contenders, lambda line: print(line, flush=True))
            if OTTLA in run.ci_loop.failures:
                raise OttlaFailed(f"ci-loop: {run.ci_loop.failures[OTTLA]}")
    if SECURITY in only:
        with step("security"):
            run.security = run_security(args.messages, args.size, min(args.rounds, 3),
                                        lambda line: print(line, flush=True))
    if ROUND_TRIPS in only:
        with step("round trips"):
            run.round_trips = run_round_trips(lambda line: print(line, flush=True), pinned=args.pin,
                                              sessions=args.round_trip_sessions)
    if INSTRUCTIONS in only:
        problem = instructions_problem()
        if problem:
            notes.append(f"instructions per request not counted: {problem}")
            run.instructions = InstructionCounts(args.instruction_rounds, {}, ottla_missing=problem)
        else:
            try:
                run.instructions = run_instructions(args.instruction_rounds, INSTRUCTION_WARMUP, count_noida,
                                                    lambda line: print(line, flush=True), baselines)
            except Exception as exc:
                # Under callgrind, Ottla's broker and the counting are the tool's as much as Ottla's:
                # the rows say why, and the rest of a long run is not lost.
                why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                print(f"instructions: Ottla could not be counted: {why}", flush=True)
                notes.append(f"instructions per request not counted: {why}")
                run.instructions = InstructionCounts(args.instruction_rounds, {}, ottla_missing=why)
    if STARTS in only:
        with step("starts"):
            run.starts = run_starts(extra_rounds, lambda line: print(line, flush=True))
            run.starts_empty = time_empty_starts(EMPTY_RUNS)
            print(*empty_start_lines(run.starts_empty), flush=True)
    if COORDINATOR_LOAD in only:
        with step("coordinator load"):
            run.coordinator_load = run_coordinator_load(1_000_000, 1_000_000, lambda line: print(line, flush=True))
    if MANY_PARTITIONS in only:
        with step("many partitions"):
            run.many_partitions = run_many_partitions(extra_rounds, lambda line: print(line, flush=True))
            run.starts_many = run_starts(extra_rounds, lambda line: print(line, flush=True), MANY_STARTS,
                                         MANY_RECORDS)
    if MANY_PRODUCERS in only or GROUP_CONSUMER in only:
        with step("many clients"):
            run.many_clients = run_many_clients(extra_rounds, MANY_PRODUCERS in only, GROUP_CONSUMER in only,
                                                lambda line: print(line, flush=True))
    if SCALE in only:
        data_bytes = int(args.scale_gib * GIB)
        run.scale_skipped = free_disk_problem(data_bytes)
        if run.scale_skipped:
            print(f"scale: skipped: {run.scale_skipped}", flush=True)
        else:
            with step("scale"):
                run.scale = run_scale(data_bytes, lambda line: print(line, flush=True))
    notes += [f"Ottla failed: {reason} (that step's figures after it are missing; the run went on and exits 1)"
              for reason in failed]

    load_after = os.getloadavg()[0]
    if ottla_revision(ROOT)[1] != fingerprint:
        notes.append(f"Ottla's sources changed during the run (it began at {revision}): the figures mix versions.")
    minutes = (time.monotonic() - clock) / 60
    target_table = targets_table(run)
    sections = [
        tables(run, args.size, args.messages),
        per_round_lines(run),
        scale_lines(run),
        ci_loop_lines(run.ci_loop, OTTLA, KAFKA),
        security_lines(run.security),
        coordinator_load_lines(run.coordinator_load),
        round_trip_lines(run.round_trips),
        instruction_lines(run.instructions),
        starts_lines(run.starts),
        empty_start_lines(run.starts_empty),
        starts_lines(run.starts_many),
        many_partitions_lines(run.many_partitions),
        many_clients_lines(run.many_clients),
        memory_lines(run),
        ["Targets (each row names the issue whose bar it is; bench/targets.py):", "", target_table]
        if target_table else [],
        [f"Note: {note}" for note in notes],
    ]
    body = [line for section in sections if section for line in [*section, ""]][:-1]
    print("\n" + "\n".join(body))
    print(f"\nThe run took {minutes:.1f} minutes; load average {load_before:.2f} at the start, {load_after:.2f} "
          f"at the end.")

    if not args.no_write:
        command_line = " ".join(["python -m bench", *(argv if argv is not None else sys.argv[1:])])
        section = "\n".join([
            f"{RUN_HEADING}{started:%Y-%m-%d %H:%M} UTC", "",
            f"`{command_line}` ({minutes:.1f} minutes)", "",
            *machine_lines(revision, load_before, load_after, _placement(args.pin)), "",
            *body,
        ])
        write_results(RESULTS_PATH, section)
        os.makedirs(RUNS_DIR, exist_ok=True)
        record_path = os.path.join(RUNS_DIR, f"{started:%Y-%m-%dT%H%M%S}.json")
        with open(record_path, "w") as f:
            json.dump(targets_record(run, started=f"{started:%Y-%m-%d %H:%M} UTC", command=command_line,
                                     ottla=revision, minutes=round(minutes, 1),
                                     load_average=[round(load_before, 2), round(load_after, 2)]), f, indent=1)
            f.write("\n")
        print(f"Written to {os.path.relpath(RESULTS_PATH)} and {os.path.relpath(record_path)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
