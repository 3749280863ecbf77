"""bench/soak.py (`make soak`) in miniature, so that it cannot rot: a few seconds of
load with abusive clients, two kill -9 cycles, and the verdict it prints."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_soak_runs_and_finds_nothing_lost():
    done = subprocess.run([sys.executable, "-m", "bench.soak", "--minutes", "0.25", "--connections", "60",
                           "--cycles", "2"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    verdict = next(line for line in done.stdout.splitlines() if line.startswith("verdict:"))
    assert " 0 lost, 0 duplicated, 0 partitions out of order" in verdict
    assert "(0 not wholly visible)" in verdict and "(0 partly visible)" in verdict
    assert "p99" in done.stdout and "peak" in done.stdout
