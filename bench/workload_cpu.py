"""What the broker spends per unit of work in the two workloads bound by many round trips
(issue 45): a Produce of many-producers (bench/many_clients.py: idempotent connections,
one Produce in flight each, acks=all) and a transaction of txn-produce-10
(bench/workloads.py: confluent-kafka, ten records, commit). The machine is shared, so
wall clock is not what is compared: each figure is counted in the broker process over a
measured window and divided by the Produce requests or transactions acknowledged in it.

- `cpu`: user and system CPU time (/proc/PID/stat), voluntary and involuntary context
  switches (/proc/PID/status: a voluntary one is the event loop going to sleep in
  epoll_wait with nothing to do, so per transaction it counts the loop's idle turns), and
  the broker's system calls by name (`perf stat` on the syscall tracepoints: epoll_wait
  is the loop's turns, the reads and writes are the requests and answers).
- `callgrind`: the broker runs under valgrind's callgrind; its counters are zeroed at the
  window's start and dumped at its end (callgrind_control): instructions per unit, the
  figure the host's load does not move. The dump is kept for callgrind_annotate.
- `cprofile`: the broker runs under cProfile, enabled at the window's start and dumped at
  its end (SIGUSR1, SIGUSR2): Python calls per unit, by function.

    python -m bench.workload_cpu many-producers [--connections 100] [--duration 5] [--measure cpu]
    python -m bench.workload_cpu txn-produce-10 [--transactions 1000] [--measure cpu]
    python -m bench.workload_cpu share-consume [--records 200000] [--consumers 1] [--measure cpu]

`--python` runs the broker with another installation's interpreter (bench.peers'
baseline_python builds one per git revision): before and after, counted alike.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

START_TIMEOUT = 900.0
# The loop's turns (libuv waits in epoll_pwait), the requests read, the answers and
# appends written, and what would show a wait (a futex: a worker thread; an fsync).
SYSCALLS = ("epoll_pwait", "read", "write", "writev", "pwrite64", "futex", "fdatasync")
PROFILE_OUT = "OTTLA_PROFILE_OUT"


# --- the broker, run by this file when measured with cProfile ---------------------------


def _launch() -> int:
    """The broker under cProfile, enabled by SIGUSR1 (from nothing) and dumped to
    $OTTLA_PROFILE_OUT by SIGUSR2."""
    import cProfile

    from ottla.tools.cli import main

    profile: list[cProfile.Profile] = []

    def enable(_signum: int, _frame: Any) -> None:
        profile[:] = [cProfile.Profile()]
        profile[0].enable()

    def dump(_signum: int, _frame: Any) -> None:
        if profile:
            profile[0].disable()
            profile[0].dump_stats(os.environ[PROFILE_OUT])
            profile.clear()

    signal.signal(signal.SIGUSR1, enable)
    signal.signal(signal.SIGUSR2, dump)
    sys.argv[0] = "ottla"
    return main()


# --- counting ----------------------------------------------------------------------------


def _proc_counts(pid: int) -> dict[str, float]:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    counts = {"user_s": int(fields[11]) / tick, "system_s": int(fields[12]) / tick}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                counts["voluntary_switches"] = int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                counts["involuntary_switches"] = int(line.split()[1])
    return counts


class Window:
    """Counts what the broker does between `start` and `stop`, the way `measure` says."""

    def __init__(self, measure: str, pid: int, work: str) -> None:
        self.measure, self.pid, self.work = measure, pid, work
        self.before: dict[str, float] = {}
        self.counts: dict[str, float] = {}
        self._perf: subprocess.Popen[str] | None = None
        self._perf_out = os.path.join(work, "perf.txt")
        self._perf_control: Any = None
        self._perf_ack: Any = None

    def prepare(self) -> None:
        """Before the workload's warm-up: perf attached, its counting off until `start`."""
        if self.measure != "cpu":
            return
        events = ",".join(f"syscalls:sys_enter_{name}" for name in SYSCALLS)
        control, ack = os.path.join(self.work, "perf.ctl"), os.path.join(self.work, "perf.ack")
        os.mkfifo(control)
        os.mkfifo(ack)
        self._perf = subprocess.Popen(["perf", "stat", "-x", ",", "-e", events, "-p", str(self.pid), "-D", "-1",
                                       "--control", f"fifo:{control},{ack}", "-o", self._perf_out],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
        self._perf_control = open(control, "w")
        self._perf_ack = open(ack)

    def _perf_command(self, command: str) -> None:
        assert self._perf_control is not None and self._perf_ack is not None
        self._perf_control.write(f"{command}\n")
        self._perf_control.flush()
        self._perf_ack.readline()

    def start(self) -> None:
        # Imported here, not at the top: the broker runs this file as a script (cprofile).
        from .request_instructions import _control

        if self.measure == "callgrind":
            _control(self.pid, "-z")
        elif self.measure == "cprofile":
            os.kill(self.pid, signal.SIGUSR1)
        else:
            self._perf_command("enable")
        self.before = _proc_counts(self.pid)

    def stop(self) -> None:
        from .request_instructions import _control, _total

        after = _proc_counts(self.pid)
        self.counts = {key: after[key] - self.before[key] for key in after}
        if self.measure == "callgrind":
            _control(self.pid, "-d")
            dumps = [path for path in os.listdir(self.work) if re.fullmatch(r"callgrind\.out\.\d+\.\d+", path)]
            newest = os.path.join(self.work, max(dumps, key=lambda path: int(path.rsplit(".", 1)[1])))
            self.counts["instructions"] = _total(newest)
            self.counts["dump"] = newest  # type: ignore[assignment]
        elif self.measure == "cprofile":
            os.kill(self.pid, signal.SIGUSR2)
        elif self._perf is not None:
            self._perf_command("disable")
            self._perf.send_signal(signal.SIGINT)
            self._perf.wait(30)
            self._perf_control.close()
            self._perf_ack.close()
            with open(self._perf_out) as f:
                for line in f:
                    parts = line.strip().split(",")
                    if len(parts) > 2 and parts[2].startswith("syscalls:sys_enter_"):
                        self.counts[parts[2].removeprefix("syscalls:sys_enter_")] = float(parts[0] or 0)


# --- the broker ---------------------------------------------------------------------------


def _broker(work: str, measure: str, python: str | None) -> Any:
    from ottla.testing import BrokerProcess

    class Broker(BrokerProcess):
        def command(self) -> list[str]:
            own = super().command()
            if python is not None:
                own[0] = python
            if measure == "callgrind":
                return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/callgrind.out.%p",
                        "--dump-line=no", "--compress-strings=no", *own]
            return own

    launcher = os.path.abspath(__file__) if measure == "cprofile" else None
    return Broker(os.path.join(work, "data"), log_path=os.path.join(work, "broker.log"),
                  env={PROFILE_OUT: os.path.join(work, "profile.out")}, launcher=launcher)


# --- the workloads ------------------------------------------------------------------------


def many_producers(broker: Any, window: Window, args: argparse.Namespace) -> float:
    """Produce requests acknowledged in the window."""
    from .many_clients import _parser, run_producers

    options = _parser().parse_args(["--connections", str(args.connections), "--processes", str(args.processes),
                                    "--warmup", str(args.warmup), "--duration", str(args.duration)])
    window.prepare()
    result = run_producers(broker, broker.process.pid, options, window=(window.start, window.stop))
    return result.records / options.batch


def txn_produce_10(broker: Any, window: Window, args: argparse.Namespace) -> float:
    """Transactions committed in the window (the client in this process: librdkafka's
    threads; the broker is another process)."""
    from .workloads import Job, _transactional_producer, _transactions, create_topic

    job = Job(broker.bootstrap, f"txn-10-{uuid.uuid4().hex[:8]}", args.transactions * 10, 100,
              time.monotonic() + 3600)
    create_topic(job, job.topic)
    producer = _transactional_producer(job)
    payload = bytes(job.size)
    window.prepare()
    _transactions(producer, job, [([payload] * 10, True)] * args.warmup_transactions)
    window.start()
    _transactions(producer, job, [([payload] * 10, True)] * args.transactions)
    window.stop()
    return args.transactions


def share_consume(broker: Any, window: Window, args: argparse.Namespace) -> float:
    """Records delivered and acknowledged in the window: from the end of the produce to
    the last consumer's commit_sync() (bench/share_consume.py, `--consumers` of them;
    the group's join is in the window too, a few requests). A first run of
    `--warmup-records` on another topic and group, not counted, imports and builds what
    the share APIs' first requests do once (about 400 million instructions)."""
    from .share_consume import share_consume as workload
    from .workloads import Job

    if args.warmup_records:
        workload(args.consumers)(Job(broker.bootstrap, f"share-warmup-{uuid.uuid4().hex[:8]}", args.warmup_records,
                                     100, time.monotonic() + 3600))
    job = Job(broker.bootstrap, f"share-{uuid.uuid4().hex[:8]}", args.records, 100, time.monotonic() + 3600)
    window.prepare()
    measured = workload(args.consumers, (window.start, window.stop))(job)
    if measured.invalid:
        raise RuntimeError(measured.invalid)
    return args.records


WORKLOADS: dict[str, tuple[str, Callable[[Any, Window, argparse.Namespace], float]]] = {
    "many-producers": ("Produce", many_producers),
    "txn-produce-10": ("transaction", txn_produce_10),
    "share-consume": ("record", share_consume),
}


def run(args: argparse.Namespace, say: Callable[[str], None] = print) -> dict[str, float]:
    """The counts per unit (a Produce or a transaction) of one run on a fresh broker."""
    unit, workload = WORKLOADS[args.workload]
    work = tempfile.mkdtemp(prefix="workload-cpu-")
    broker = _broker(work, args.measure, args.python)
    try:
        broker.start(timeout=START_TIMEOUT)
        window = Window(args.measure, broker.process.pid, work)
        units = workload(broker, window, args)
        if args.measure == "cprofile":
            time.sleep(1.0)  # the dump is written by the broker's signal handler
            _print_profile(os.path.join(work, "profile.out"), units, args.top, say)
            if args.keep:
                shutil.copy(os.path.join(work, "profile.out"), os.path.join(args.keep, f"{args.workload}.prof"))
        if args.measure == "callgrind" and args.keep:
            kept = os.path.join(args.keep, os.path.basename(str(window.counts["dump"])))
            shutil.copy(str(window.counts["dump"]), kept)
            say(f"callgrind dump kept: {kept}")
    finally:
        broker.stop(timeout=300)
        shutil.rmtree(work, ignore_errors=True)
    per_unit = {key: value / units for key, value in window.counts.items() if isinstance(value, (int, float))}
    say(f"{args.workload} ({args.measure}): {units:,.0f} {unit}s in the window; per {unit}: "
        + ", ".join(_shown(key, value) for key, value in per_unit.items()))
    return per_unit


def _shown(key: str, value: float) -> str:
    if key.endswith("_s"):
        return f"{key[:-2]} {value * 1e6:,.1f} us"
    if key == "instructions":
        return f"{value:,.0f} instructions"
    return f"{key} {value:.2f}"


def _print_profile(path: str, units: float, top: int, say: Callable[[str], None]) -> None:
    import pstats

    stats = pstats.Stats(path)
    entries = stats.stats  # type: ignore[attr-defined]
    calls = sum(entry[1] for entry in entries.values())
    say(f"Python calls per unit: {calls / units:,.1f}; the most called, per unit (calls, own time us):")
    ranked = sorted(entries.items(), key=lambda item: item[1][1], reverse=True)[:top]
    for (filename, line, name), (_, ncalls, own, _cumulative, _) in ranked:
        where = f"{os.path.basename(filename)}:{line}" if line else filename
        say(f"  {ncalls / units:8.2f}  {own / units * 1e6:8.2f}  {name} ({where})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workload_cpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=list(WORKLOADS))
    parser.add_argument("--measure", choices=["cpu", "callgrind", "cprofile"], default="cpu")
    parser.add_argument("--runs", type=int, default=1, help="fresh brokers, one after the other")
    parser.add_argument("--python", help="the broker's interpreter (another installation of Ottla)")
    parser.add_argument("--connections", type=int, default=100, help="many-producers")
    parser.add_argument("--processes", type=int, default=2, help="many-producers' client processes")
    parser.add_argument("--warmup", type=float, default=2.0, help="many-producers, seconds")
    parser.add_argument("--duration", type=float, default=5.0, help="many-producers, seconds measured")
    parser.add_argument("--transactions", type=int, default=1000, help="txn-produce-10, measured")
    parser.add_argument("--warmup-transactions", type=int, default=100, help="txn-produce-10")
    parser.add_argument("--records", type=int, default=200_000, help="share-consume")
    parser.add_argument("--consumers", type=int, default=1, help="share-consume's consumer processes")
    parser.add_argument("--warmup-records", type=int, default=20_000, help="share-consume, before the window")
    parser.add_argument("--top", type=int, default=25, help="cprofile: functions listed")
    parser.add_argument("--keep", help="a directory to keep the window's callgrind dump or cProfile stats in")
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    runs = [run(args, lambda line: print(line, flush=True)) for _ in range(args.runs)]
    if len(runs) > 1:
        print("medians: " + ", ".join(_shown(key, sorted(r[key] for r in runs)[len(runs) // 2])
                                      for key in runs[0]), flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        sys.exit(_launch())  # run by BrokerProcess as the broker's launcher (--measure cprofile)
    sys.exit(main())
