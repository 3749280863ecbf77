"""fsync before acknowledging (`--fsync`), with group commit.

By default, as in Kafka, an acknowledged batch is in the page cache: it survives the
broker process dying (kill -9), not the machine losing power. With fsync on, a response
is sent only after every partition written since the last fsync is on disk, with the
directory entries of its new files (storage/directories.py). Requests
that arrive while an fsync runs wait for the next one, which covers all of them: many
producers share one fsync instead of paying one each.

The partition logs report each append here (through the broker's on_append callback);
the fsyncs run in a worker thread on duplicated descriptors, so the event loop keeps
serving and a segment deleted meanwhile cannot pull a descriptor from under them. The
periodic recovery checkpoint flushes the same way (`flush_in_background`), and so does
a segment roll in the default mode (`RollFlush`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from ottla.storage.log import PartitionLog
from ottla.storage.log_manager import LogManager

from .logging import get_logger

_log = get_logger("ottla.durability")


class GroupCommit:
    def __init__(self, logs: LogManager) -> None:
        self.logs = logs
        self._dirty: set[tuple[str, int]] = set()
        self._waiting: list[asyncio.Future[None]] = []
        self._running: asyncio.Task[None] | None = None
        self.generation = 0  # counts appends, so a request can tell whether it wrote
        self.rounds = 0  # fsync rounds run, each covering every request waiting for it

    def appended(self, topic: str, partition: int) -> None:
        self._dirty.add((topic, partition))
        self.generation += 1

    async def sync(self) -> None:
        """Return once everything appended so far is on disk."""
        if not self._dirty and self._running is None:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        if self._running is None:
            self._running = asyncio.get_running_loop().create_task(self._run())
        await waiter

    async def _run(self) -> None:
        try:
            while self._waiting:
                dirty, waiting = self._dirty, self._waiting
                self._dirty, self._waiting = set(), []
                await flush_in_background(
                    [log for log in (self.logs.partition(t, p) for t, p in dirty) if log is not None])
                self.rounds += 1
                for waiter in waiting:
                    if not waiter.done():
                        waiter.set_result(None)
        finally:
            self._running = None


class RollFlush:
    """Kafka's flush of a rolled segment, in the default mode: UnifiedLog.roll schedules
    a "flush-log" task that fsyncs the new producer state snapshot and every segment
    below the new one (log, offset, time and transaction indexes) with the partition's
    directory, then moves the recovery point to the new segment's base offset. Here the
    partition logs report each roll (PartitionLog.on_roll) and the fsyncs run in the
    fsync thread like every other flush, so the event loop keeps serving. The recovery
    point file is written at the next checkpoint, as in Kafka. (Ottla's snapshot at a roll
    is fsynced when written; its directory entry is synced here.) With --fsync there is
    nothing to add: every write is flushed before it is acknowledged."""

    def __init__(self, logs: LogManager) -> None:
        self.logs = logs
        self._due: dict[PartitionLog, int] = {}  # log -> flush everything below this offset
        self._running: asyncio.Task[None] | None = None
        self.rounds = 0  # flush rounds run, each covering every roll reported before it

    def rolled(self, log: PartitionLog, base_offset: int) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # off the event loop (no broker serving): the next checkpoint flushes
        self._due[log] = max(base_offset, self._due.get(log, 0))
        if self._running is None:
            self._running = loop.create_task(self._run())

    async def wait_idle(self) -> None:
        """Return once every roll reported so far is flushed (or its flush failed)."""
        while self._running is not None:
            await asyncio.wait({self._running})  # raises nothing: stop() must go on

    async def _run(self) -> None:
        try:
            while self._due:
                # A partition deleted since its roll is flushed no more.
                due = {log: offset for log, offset in self._due.items()
                       if self.logs.partition(log.topic, log.partition) is log}
                self._due = {}
                try:
                    await flush_in_background(due, below=due)
                except OSError as exc:
                    # The periodic checkpoint flushes again; a storage error is the
                    # produce path's to report, not this background task's.
                    _log.warning("flush of rolled segments failed", partitions=len(due), error=str(exc))
                self.rounds += 1
        finally:
            self._running = None


async def flush_in_background(logs: Iterable[PartitionLog], below: Mapping[PartitionLog, int] | None = None) -> None:
    """fsync what each log wrote since its last flush (or, for the logs `below` names,
    only in its segments below that offset: a rolled segment's flush), in a worker
    thread, then move their flushed offsets (the recovery points) on. The descriptors
    are duplicated (see the module's docstring) a group at a time, about
    FLUSH_GROUP_FILES of them: after a crash every partition is unflushed, and
    duplicating them all at once ran a broker with 10,000 partitions, or a low
    descriptor limit, out of descriptors."""
    limits = below or {}
    if below is None:
        pending = [log for log in logs if log.flushed_offset < log.log_end_offset or log.directories_unsynced()]
    else:
        pending = [log for log in logs if log.flushed_offset < limits[log]]
    while pending:
        work: list[tuple[PartitionLog, int, tuple[int, int]]] = []
        fds: list[int] = []
        try:
            while pending and len(fds) < FLUSH_GROUP_FILES:
                log = pending.pop()
                limit = limits.get(log)
                end = log.log_end_offset if limit is None else limit
                stamps = log.directory_stamps()
                fds += log.unflushed_files(limit)
                work.append((log, end, stamps))
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        await asyncio.get_running_loop().run_in_executor(_FSYNC_THREAD, _fsync_all, fds)
        for log, end, stamps in work:
            log.mark_flushed(end, stamps)


# Duplicated descriptors a flush holds at once (see flush_in_background).
FLUSH_GROUP_FILES = 64
# The fsyncs' own thread: an acks=all answer on a --fsync broker waits for it, so no
# other work (the schema registry's parsing, a compaction) may queue in front of it.
_FSYNC_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ottla-fsync")


def _fsync_all(fds: list[int]) -> None:
    """fsync and close every descriptor (all are closed even if an fsync fails)."""
    try:
        for fd in fds:
            os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)
