"""The instructions run of `python -m bench` (`--only instructions`, issue 45): Ottla's
instructions per request (bench/request_instructions.py's measure: the broker under
callgrind, dumped as each request arrives, the least of the rounds), an earlier Ottla's
the same way for each `--baseline REV` (the table before and after, in one run), and
noida-db's requests of TARGET_REQUESTS counted from outside (measure_requests_from_outside);
bench/targets.py judges them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .request_instructions import TARGET_REQUESTS, measure, measure_requests_from_outside


@dataclass
class InstructionCounts:
    """What `python -m bench` keeps of its instructions run."""
    rounds: int
    ottla: dict[str, tuple[float, int]]  # request -> (median, least) over the rounds, dumped as each arrives
    peer: dict[str, int] = field(default_factory=dict)  # noida-db's, counted from outside (PeerCounts.least)
    peer_missing: dict[str, str] = field(default_factory=dict)  # request -> why noida-db has no figure
    peer_method: str = "counted from outside, least of the rounds"
    ottla_missing: str = ""  # why Ottla has no figures (valgrind missing), if it has none
    # ottla@REV -> request -> (median, least): an earlier revision's, counted as Ottla's are
    baselines: dict[str, dict[str, tuple[float, int]]] = field(default_factory=dict)


def instructions_problem() -> str:
    """Why the instructions cannot be counted on this machine, or ''."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        return "valgrind is not installed (apt-get install valgrind)"
    if shutil.which("cc") is None or not os.path.exists("/usr/include/valgrind/callgrind.h"):
        return "no C compiler or no valgrind/callgrind.h (apt-get install gcc valgrind)"
    return ""


def run_instructions(rounds: int, warmup: int, peer: bool, say: Callable[[str], None],
                     baselines: Sequence[tuple[str, str]] = ()) -> InstructionCounts:
    """Ottla's instructions per request, each (name, python) of `baselines`' (an earlier
    revision's installation), and noida-db's of TARGET_REQUESTS where `peer`: a peer that
    cannot be counted gets the reason, not a figure."""
    result = InstructionCounts(rounds, measure(rounds, warmup, lambda line: say(f"instructions: Ottla {line}")))
    for name, python in baselines:
        try:
            result.baselines[name] = measure(rounds, warmup,
                                             lambda line, name=name: say(f"instructions: {name} {line}"), python)
        except Exception as exc:  # an earlier tree the launcher cannot drive: Ottla's own figures stand
            say(f"instructions: {name} could not be counted: {type(exc).__name__}: {exc}")
            result.baselines[name] = {}
    if not peer:
        result.peer_missing = dict.fromkeys(TARGET_REQUESTS, "noida-db not in this run's peers")
        return result
    try:
        counted = measure_requests_from_outside("noida-db", rounds, warmup, lambda line: say(f"instructions: {line}"))
    except Exception as exc:  # noida-db missing, or refusing a request of the round: no figures, the reason
        why = f"noida-db could not be counted: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        result.peer_missing = dict.fromkeys(TARGET_REQUESTS, why)
        return result
    result.peer, result.peer_missing = counted.least, counted.missing
    result.peer_method = (f"counted from outside, least of {rounds} less the least empty interval, "
                          f"{counted.empty:,}")
    return result


def instruction_lines(counts: InstructionCounts | None) -> list[str]:
    if counts is None:
        return []
    before = list(counts.baselines)
    lines = [f"Instructions per request (bench/request_instructions.py; callgrind Ir, {counts.rounds} rounds): "
             "Ottla's dumped as each request arrives, the median and the least of the rounds"
             + (f", and the least of {', '.join(before)} the same way" if before else "")
             + f"; noida-db's {counts.peer_method}", "",
             "| request | Ottla, median | Ottla, least | "
             + "".join(f"{name}, least | change | " for name in before) + "noida-db | Ottla/noida-db |",
             "|---|---:|---:|" + "---:|---:|" * len(before) + "---:|---:|"]
    for name, (median, least) in counts.ottla.items():
        theirs = counts.peer.get(name)
        cells = [f"{median:,.0f}", f"{least:,}"]
        for revision in before:
            old = counts.baselines[revision].get(name)
            cells += ["-", "-"] if old is None else [f"{old[1]:,}", f"{least / old[1] - 1:+.1%}"]
        cells += ["-" if theirs is None else f"{theirs:,}", f"{least / theirs:.2f}x" if theirs else "-"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    whys = sorted(set(counts.peer_missing.values()))
    return lines + ([""] + [f"noida-db: {why} ({', '.join(n for n, w in counts.peer_missing.items() if w == why)})"
                            for why in whys] if whys else [])
