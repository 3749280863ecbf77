"""Worker threads: where a handler runs work too long for the event loop.

A request handler runs on the event loop, between every other connection's turns.
Work that can take tens of milliseconds (checking the records of a large or compressed
batch) runs here instead, in a small pool of threads, while the loop goes on serving;
the work must let go of the GIL to gain anything (the record walk in C and the
decompressors do). Two threads: the machine's cores are shared with the loop, and work
queued behind them waits rather than taking more memory or CPU from everyone else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class WorkerThreads:
    def __init__(self, threads: int = 2) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ottla-worker")

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, work, *args)

    def close(self) -> None:
        """At shutdown, once no connection is left: nothing is queued any more."""
        self._pool.shutdown(wait=True, cancel_futures=True)
