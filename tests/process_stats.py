"""What a broker process holds, read from /proc: for the tests that check that bad or
vanished clients leave nothing behind."""

from __future__ import annotations

import os


def resident_mib(pid: int) -> float:
    """The process's resident memory (VmRSS), in MiB."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))
