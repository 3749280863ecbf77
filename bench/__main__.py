"""`python -m bench` (what `make bench` runs): Ottla against noida-db in interleaved rounds.

Each round starts a fresh broker, runs every workload of bench.client.WORKLOADS in
order against it, each in a client subprocess, and stops the broker. Rounds alternate
the brokers (Ottla, noida-db, Ottla, noida-db, ...) so that drift of the machine over
the run (other load, thermal state) falls on both alike. If noida-db is missing or
fails, Ottla runs alone and the output says why. Exits 1 if a round fails on Ottla.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import uuid
from typing import Callable

from .client import WORKLOADS, Measurement, Workload
from .peers import Noida, Ottla, noida_command
from .report import (RUN_HEADING, Results, machine_lines, mb_rate, per_round_lines, rate, results_table,
                     write_results)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_PATH = os.path.join(ROOT, "bench", "RESULTS.md")
CLIENT_GRACE = 30.0  # seconds past its own deadline before a client process is killed


class RoundFailed(Exception):
    pass


def run_client(workload: Workload, bootstrap: str, topic: str, args: argparse.Namespace) -> Measurement:
    cmd = [sys.executable, "-m", "bench.client", workload.name, "--bootstrap", bootstrap, "--topic", topic,
           "--messages", str(args.messages), "--size", str(args.size), "--timeout", str(args.timeout)]
    try:
        done = subprocess.run(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=args.timeout + CLIENT_GRACE)
    except subprocess.TimeoutExpired as exc:
        raise RoundFailed(f"{workload.name}: the client did not exit within {exc.timeout:.0f} s") from exc
    if done.returncode != 0:
        stderr = "\n".join(done.stderr.strip().splitlines()[-10:])
        raise RoundFailed(f"{workload.name}: client exited with code {done.returncode}:\n{stderr}")
    return Measurement(**json.loads(done.stdout.strip().splitlines()[-1]))


def run_round(peer: Ottla | Noida, args: argparse.Namespace, label: str) -> dict[str, Measurement]:
    """Every workload against a fresh `peer`, which is stopped and removed afterwards."""
    topics: dict[str, str] = {}  # a workload's topic key -> the topic's name in this round
    measurements = {}
    try:
        try:
            peer.start()
        except RuntimeError as exc:
            raise RoundFailed(f"could not start: {exc}") from exc
        for workload in WORKLOADS.values():
            topic = topics.setdefault(workload.topic, f"bench-{workload.topic}-{uuid.uuid4().hex[:8]}")
            try:
                m = run_client(workload, peer.bootstrap, topic, args)
            except RoundFailed as exc:
                raise RoundFailed(f"{exc}\n{peer.name} log, last lines:\n{peer.log_tail()}") from exc
            print(f"{label}  {peer.name:<9} {workload.name:<20} {rate(m):>11,.0f} msgs/s {mb_rate(m):>8.2f} MB/s "
                  f"({m.seconds:.2f} s)", flush=True)
            measurements[workload.name] = m
    finally:
        peer.stop()
    return measurements


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per broker (default %(default)s)")
    parser.add_argument("--messages", type=int, default=200_000, help="messages per workload (default %(default)s)")
    parser.add_argument("--size", type=int, default=100, help="bytes per message value (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds one workload may take before it counts as failed (default %(default)s)")
    parser.add_argument("--no-write", action="store_true", help="do not write bench/RESULTS.md")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.messages < 1 or args.size < 1:
        parser.error("--rounds, --messages and --size must be positive")

    notes: list[str] = []
    peers: list[tuple[str, Callable[[], Ottla | Noida]]] = [(Ottla.name, Ottla)]
    command = noida_command()
    if command is None:
        notes.append("noida-db is not installed (pip install noida-db==0.2.3): Ottla ran alone.")
    else:
        peers.append((Noida.name, lambda: Noida(command)))
    brokers = [name for name, _ in peers]
    workloads = list(WORKLOADS)
    results: Results = {name: {w: {} for w in workloads} for name in brokers}
    started = datetime.datetime.now(datetime.timezone.utc)
    print(f"{args.rounds} rounds of {', '.join(workloads)}: {args.messages:,} messages x {args.size} B, "
          f"brokers {', '.join(brokers)}", flush=True)

    for r in range(args.rounds):
        for name, make_peer in list(peers):
            try:
                for workload, m in run_round(make_peer(), args, f"round {r + 1}/{args.rounds}").items():
                    results[name][workload][r] = m
            except RoundFailed as exc:
                print(f"round {r + 1}/{args.rounds}  {name} failed: {exc}", file=sys.stderr, flush=True)
                if name == Ottla.name:
                    return 1
                # noida-db is only the yardstick: without it the run still measures Ottla.
                notes.append(f"noida-db failed in round {r + 1} and was left out from then on: "
                             f"{str(exc).splitlines()[0]}")
                peers.remove((name, make_peer))

    table = results_table(results, brokers, workloads, baseline=Ottla.name)
    rounds = per_round_lines(results, brokers, workloads)
    print(f"\nMedians over {args.rounds} rounds, {args.messages:,} messages x {args.size} B "
          f"(MB = 10^6 bytes of values):\n")
    print(table)
    print("\n".join(["", *rounds, *(f"Note: {note}" for note in notes)]))

    if not args.no_write:
        command_line = f"python -m bench --rounds {args.rounds} --messages {args.messages} --size {args.size}"
        section = "\n".join([
            f"{RUN_HEADING}{started:%Y-%m-%d %H:%M} UTC", "",
            f"`{command_line}`", "",
            *machine_lines(ROOT), "",
            table, "",
            *rounds,
            *(["", *(f"Note: {note}" for note in notes)] if notes else []),
        ])
        write_results(RESULTS_PATH, section)
        print(f"\nWritten to {os.path.relpath(RESULTS_PATH)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
