"""Coordinator state is rebuilt from its internal topic after the broker is serving,
as Kafka loads coordinator partitions: until a `__transaction_state` or
`__consumer_offsets` partition is loaded, requests for the transactional ids or groups
it holds are answered COORDINATOR_LOAD_IN_PROGRESS (clients retry), and everything
else, produce and fetch on ordinary topics included, is served meanwhile.

The replay runs on the event loop in slices of SLICE_SECONDS, one coordinator after
the other: the state it builds is the loop's own, so no lock guards it, and no
connection waits much longer than a slice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from ottla.protocol.batch import BatchHeader
from ottla.storage.log import PartitionLog

# A request arriving during a load waits about this long for the loop (a slice ends
# after the batch that crosses it).
SLICE_SECONDS = 0.005


async def replay(log: PartitionLog, apply: Callable[[BatchHeader, bytes], None]) -> int:
    """Hand every batch of `log`, oldest first, to `apply`, yielding to the loop between
    slices. Returns once a slice reached the end of the log: the partition can be marked
    loaded in the same turn of the loop, so nothing appended meanwhile (a transaction
    marker) is missed. Returns how many batches were replayed."""
    next_offset = log.log_start_offset
    replayed = 0
    # A slice starts with a turn of the loop: the previous partition's last slice, and
    # its caller's work after it, were the loop's too.
    await asyncio.sleep(0)
    while True:
        deadline = time.monotonic() + SLICE_SECONDS
        for header, batch in log.batches(next_offset):
            apply(header, batch)
            replayed += 1
            next_offset = header.last_offset + 1
            if time.monotonic() >= deadline:
                break
        else:
            return replayed
        await asyncio.sleep(0)
