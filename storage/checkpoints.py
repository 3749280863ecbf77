"""Kafka's offset checkpoint files in a data directory: `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint` and `cleaner-offset-checkpoint`.

Text, in Kafka's layout:

    0                 <- version
    2                 <- number of entries
    orders 0 1500     <- topic, partition, offset
    orders 1 1420

Written to a temporary file, fsynced and renamed over the old one, and the directory
fsynced (as Kafka's CheckpointFile does), so a crash leaves either the old or the new
checkpoint, never half of one, and once written a power loss does not bring the old
one back (an older log start offset would bring deleted records back).
"""

from __future__ import annotations

import os

from .directories import replace_durably

VERSION = 0

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"


def write_checkpoint(path: str, offsets: dict[tuple[str, int], int]) -> None:
    lines = [str(VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        os.fsync(f.fileno())
    replace_durably(tmp, path)


def read_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """The offsets in a checkpoint file; empty if it is missing or unreadable (recovery
    then starts from the beginning, which is slower but never wrong)."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != VERSION:
            return {}
        count = int(lines[1])
        offsets = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split(" ")
            offsets[(topic, int(partition))] = int(offset)
        return offsets if len(offsets) == count else {}
    except (IndexError, ValueError):
        return {}
