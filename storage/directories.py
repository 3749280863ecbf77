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
from collections.abc import Iterable

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


class DirectorySync:
    """A partition's directory entries and what a flush must sync of them: the latest
    change to its own directory (segments deleted or swapped; its files report their own
    creation) and to the data directory's entry for it (the partition's directory
    created), against the stamps the last flush made durable. Kafka syncs the directory
    in the same way after new segments (LocalLog.flush)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.own = 0
        self.parent = 0
        self._own_synced = 0
        self._parent_synced = 0

    def changed(self) -> None:
        """An entry of the partition's directory was created, renamed or deleted."""
        self.own = directory_changed()

    def created(self) -> None:
        """The partition's directory itself was created in the data directory."""
        self.parent = directory_changed()

    def latest(self, file_stamps: Iterable[int]) -> tuple[int, int]:
        """(own directory, data directory's entry): the latest changes, with those of
        the files that report their own (`file_stamps`)."""
        return max(self.own, *file_stamps), self.parent

    def unsynced(self, stamps: tuple[int, int]) -> bool:
        return stamps[0] > self._own_synced or stamps[1] > self._parent_synced

    def descriptors(self, stamps: tuple[int, int]) -> list[int]:
        """Descriptors (the caller closes them) of the directories changed as of
        `stamps` and not synced since: for an fsync that may run in another thread."""
        fds: list[int] = []
        try:
            if stamps[0] > self._own_synced:
                fds.append(open_directory(self.directory))
            if stamps[1] > self._parent_synced:
                fds.append(open_directory(os.path.dirname(self.directory)))
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def synced(self, stamps: tuple[int, int]) -> None:
        """The directories are durable as of `stamps` (taken before the fsync)."""
        self._own_synced = max(self._own_synced, stamps[0])
        self._parent_synced = max(self._parent_synced, stamps[1])
