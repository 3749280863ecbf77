"""Wake-ups for long-polling Fetch requests.

A Fetch that found fewer than `min_bytes` waits here for an append to one of its
partitions (or its deadline): no polling loop, no timer per partition. The partition
logs call `notify` after every append, through the callback the broker gives the log
manager.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Container


class PartitionWatchers:
    def __init__(self) -> None:
        self._waiting: defaultdict[tuple[str, int], set[asyncio.Future[None]]] = defaultdict(set)
        # The partitions some Fetch waits on (read only): notify does nothing for any
        # other, so the logs need not call it for them (LogManager's appends_wanted).
        self.waited: Container[tuple[str, int]] = self._waiting.keys()

    def notify(self, topic: str, partition: int) -> None:
        waiters = self._waiting.pop((topic, partition), None)
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    def wake_all(self) -> None:
        for key in list(self._waiting):
            self.notify(*key)

    async def wait(self, partitions: list[tuple[str, int]], timeout: float) -> None:
        """Return at the first append to any of `partitions`, or after `timeout` seconds."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for key in partitions:
            self._waiting[key].add(future)
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            pass
        finally:
            for key in partitions:
                waiters = self._waiting.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiting[key]
