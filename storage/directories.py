"""Directory entries and their durability.

An fsync of a file makes its bytes durable, not its name: after a power loss, a file
created, renamed or deleted since its directory was last fsynced may be back as it was,
taking fsynced data with it (a new segment's `.log` gone, a checkpoint renamed over the
old one back to the old one). Kafka fsyncs the directory after the entries that
matter (LocalLog.flush after new segments, Utils.atomicMoveWithFallback after a
rename): so does Ottla, here.

Changes to a partition's directory are stamped from one process-wide counter
(`directory_changed`), from any thread (a checkpoint's worker writes snapshots): a
flush that reads a stamp newer than the one it last synced fsyncs the directory too.
"""

from __future__ import annotations

import itertools
import os

# next() on a count is atomic in CPython: stamps from the event loop and worker threads
# never repeat, and a larger one is always a later change.
_stamps = itertools.count(1)


def directory_changed() -> int:
    """A fresh stamp, for an entry just created, renamed or deleted."""
    return next(_stamps)


def open_or_create(path: str, flags: int) -> tuple[int, bool]:
    """Open `path` (with `flags`), creating it empty if it is missing: (descriptor,
    whether it was created). Opening an existing file costs the one call it did."""
    try:
        return os.open(path, flags), False
    except FileNotFoundError:
        return os.open(path, flags | os.O_CREAT, 0o644), True


def fsync_directory(path: str) -> None:
    """Make the entries of directory `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_directory(path: str) -> int:
    """A descriptor of directory `path`, for an fsync in another thread (the caller
    closes it)."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY)


def replace_durably(source: str, target: str) -> None:
    """Rename `source` (complete and fsynced) over `target`, and fsync the directory,
    as Kafka's atomicMoveWithFallback: the new file is there after a power loss, and
    never a torn one."""
    os.replace(source, target)
    fsync_directory(os.path.dirname(target) or ".")
