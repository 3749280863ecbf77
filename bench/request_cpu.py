"""The broker's own CPU per request (issue 15), measured so that a loaded machine
matters little: round trips' wall-clock times swing with the load, CPU time hardly.

The broker runs as a subprocess, serving one raw-socket client the rounds of
bench/round_trips.py (FindCoordinator, Metadata, InitProducerId, AddPartitionsToTxn,
Produce, EndTxn, Fetch, one at a time). Two figures:

- per round: the broker process's utime + stime (/proc/<pid>/stat) over the measured
  rounds, divided by their number: everything the broker spends, the event loop and
  the system calls included;
- per request: the median time the broker spends in `Connection.data_received` (and
  in the worker task's `_serve`, for a request served there) on a request of that API,
  timed in the broker by this file run as its launcher. That code never blocks, so the
  median is its CPU time, the send() of the answer included.

`--base DIR` runs a second code tree too (a directory holding `ottla/broker`,
`ottla/protocol`, ...; e.g. `git archive` of an older commit): both brokers run at once
and take the rounds in turn, so that drift of the machine falls on both alike.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections import defaultdict

REQUEST_KEYS = {"FindCoordinator": 10, "Metadata": 3, "InitProducerId": 22, "AddPartitionsToTxn": 24, "Produce": 0,
                "EndTxn": 26, "Fetch": 1}
WORKER = 1000  # added to the API key for what the worker task spent


def _launch() -> int:
    """In the broker's process: time each request, write the times out at exit."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # bench/client.py is no `client`
    from ottla.tools.cli import main
    try:
        from ottla.broker.network.connection import Connection
    except ImportError:  # a tree from before broker/ had rooms
        from ottla.broker.connection import Connection  # type: ignore[no-redef]

    times: dict[int, list[int]] = defaultdict(list)
    data_received, serve, clock = Connection.data_received, Connection._serve, time.perf_counter_ns

    def timed_data_received(self: Connection, data: bytes) -> None:
        started = clock()
        try:
            data_received(self, data)
        finally:  # a round's requests arrive one per read, size prefix first
            times[int.from_bytes(data[4:6], "big") if len(data) >= 6 else -1].append(clock() - started)

    async def timed_serve(self: Connection, frame: memoryview) -> bool:
        started = clock()
        try:
            return await serve(self, frame)
        finally:
            times[WORKER + int.from_bytes(frame[:2], "big")].append(clock() - started)

    Connection.data_received = timed_data_received  # type: ignore[method-assign]
    Connection._serve = timed_serve  # type: ignore[method-assign]
    def write_times() -> None:
        with open(os.environ["OTTLA_REQUEST_TIMES"], "w") as out:
            json.dump(times, out)

    atexit.register(write_times)
    sys.argv[0] = "ottla"
    return main()


def _cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def measure(trees: list[str | None], rounds: int, warmup: int) -> list[tuple[float, dict[str, float]]]:
    """Per code tree, (broker CPU us per round, median us per request by name). The
    brokers run side by side and take the rounds in turn, so that what else the
    machine does falls on all of them alike."""
    from ottla.testing import BrokerProcess
    from tests.clients import create_topic
    from tests.wire import WireClient

    from .round_trips import TOPIC, _round

    brokers, clients, paths = [], [], []
    try:
        for tree in trees:
            workdir = tempfile.mkdtemp(prefix="request-cpu-")
            paths.append(os.path.join(workdir, "times.json"))
            env = {"OTTLA_REQUEST_TIMES": paths[-1]}
            if tree:
                env["PYTHONPATH"] = tree  # ahead of the installed (editable) ottla
            brokers.append(BrokerProcess(os.path.join(workdir, "data"), env=env, launcher=os.path.abspath(__file__)))
            brokers[-1].start()
            create_topic(brokers[-1].bootstrap, TOPIC, 1)
            client = WireClient(brokers[-1].bootstrap, timeout=30)
            client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.sock.setblocking(False)
            clients.append(client)
        cpu = [0.0] * len(trees)
        for i in range(warmup + rounds):
            for k in range(len(trees)) if i % 2 == 0 else reversed(range(len(trees))):
                before = _cpu_seconds(brokers[k].process.pid) if i >= warmup else 0.0  # type: ignore[union-attr]
                _round(clients[k])
                if i >= warmup:
                    cpu[k] += _cpu_seconds(brokers[k].process.pid) - before  # type: ignore[union-attr]
    finally:
        for client in clients:
            client.close()
        for broker in brokers:
            broker.stop()
    results = []
    for path, seconds in zip(paths, cpu, strict=True):
        with open(path) as saved:
            times = json.load(saved)

        def median_us(key: int, times: dict[str, list[float]] = times) -> float:
            # A request the worker served only now and then does not count (none should be).
            got = times.get(str(key), [])
            return statistics.median(got[-rounds:]) / 1000 if len(got) > rounds // 2 else 0.0

        results.append((seconds / rounds * 1e6,
                        {name: median_us(key) + median_us(WORKER + key) for name, key in REQUEST_KEYS.items()}))
    return results


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.request_cpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="a second code tree to compare with the working tree's")
    parser.add_argument("--runs", type=int, default=3, help="runs (a fresh broker of each code tree per run)")
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=300)
    args = parser.parse_args()
    trees = [args.base, None] if args.base else [None]
    results: list[list[tuple[float, dict[str, float]]]] = [[] for _ in trees]
    for _ in range(args.runs):
        for tree, runs, result in zip(trees, results, measure(trees, args.rounds, args.warmup), strict=True):
            runs.append(result)
            print(f"{tree or 'working tree'}: {result[0]:,.0f} us a round;",
                  ", ".join(f"{name} {us:.0f}" for name, us in result[1].items()), flush=True)
    print(f"\nmedians of {args.runs} runs, microseconds of broker CPU")
    print("| code | a round (/proc) | " + " | ".join(REQUEST_KEYS) + " |")
    print("|---" * (2 + len(REQUEST_KEYS)) + "|")
    for tree, runs in zip(trees, results, strict=True):
        print(f"| {tree or 'working tree'} | {statistics.median(r[0] for r in runs):,.0f} | "
              + " | ".join(f"{statistics.median(r[1][name] for r in runs):.0f}" for name in REQUEST_KEYS) + " |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        sys.exit(_launch())  # run by BrokerProcess as the broker's launcher
    main()
