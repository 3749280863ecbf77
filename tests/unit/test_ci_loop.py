"""bench.ci_loop's verdicts: a step at most Kafka's time, the whole test at most 0.8x
Kafka's, a step that takes about the same on every broker called client-bound, and a
broker that stopped short has figures for the steps it did and none for the whole."""

from __future__ import annotations

from bench.ci_loop import STEPS, CiLoop, ci_loop_lines


def _row(lines: list[str], name: str) -> list[str]:
    (row,) = [line for line in lines if line.startswith(f"| {name} |")]
    return [cell.strip() for cell in row.strip("|").split("|")]


def test_verdicts_per_step_and_for_the_whole_test():
    ottla = {step: 0.1 for step in STEPS} | {"produce 100": 0.5, "create topic": 0.4}
    kafka = {step: 0.2 for step in STEPS} | {"produce 100": 0.5}
    noida = dict(list(ottla.items())[:5])  # stopped short at the KIP-848 step
    result = CiLoop(["Ottla", "kafka", "noida-db"], {"Ottla": [ottla], "kafka": [kafka], "noida-db": [noida]},
                    {"noida-db": "round 1: KIP-848 group: first record: no record"})
    lines = ci_loop_lines(result)
    assert _row(lines, "create topic")[-1] == "NOT MET (at most Kafka's)"
    assert _row(lines, "produce 100")[-1] == "met (at most Kafka's); client-bound (every broker within 25%)"
    assert _row(lines, "one transaction")[-1] == "met (at most Kafka's)"
    assert _row(lines, "KIP-848 group: first record")[1:5] == ["0.100", "0.200", "n/a", "0.100"]
    whole = _row(lines, "whole test")
    assert whole[1:6] == ["1.400", "1.700", "n/a", "1.400", "0.82"] and whole[-1] == "NOT MET (at most 0.8x Kafka's)"
