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
periodic recovery checkpoint flushes the same way (`flush_in_background`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from ottla.storage.log import PartitionLog
from ottla.storage.log_manager import LogManager


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


async def flush_in_background(logs: Iterable[PartitionLog]) -> None:
    """fsync what each log wrote since its last flush, in a worker thread, then move
    their flushed offsets (the recovery points) on. The descriptors are duplicated
    (see the module's docstring) a group at a time, about FLUSH_GROUP_FILES of them:
    after a crash every partition is unflushed, and duplicating them all at once ran a
    broker with 10,000 partitions, or a low descriptor limit, out of descriptors."""
    pending = [log for log in logs if log.flushed_offset < log.log_end_offset or log.directories_unsynced()]
    while pending:
        work: list[tuple[PartitionLog, int, tuple[int, int]]] = []
        fds: list[int] = []
        try:
            while pending and len(fds) < FLUSH_GROUP_FILES:
                log = pending.pop()
                end = log.log_end_offset
                stamps = log.directory_stamps()
                fds += log.unflushed_files()
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
