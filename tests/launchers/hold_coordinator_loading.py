"""Run the broker so that its coordinators do not start loading `__transaction_state`
and `__consumer_offsets` until the file named by OTTLA_TEST_RELEASE_LOADING exists: a
load that lasts exactly as long as a test needs to look at the broker meanwhile
(tests/integration/test_coordinator_loading.py). A real load is that long only after a
history of millions of records.

Started by `BrokerProcess(launcher=...)` with the arguments of `ottla serve`; the hold
lives here, in the tests, and the shipped coordinators know nothing of it.
"""

from __future__ import annotations

import asyncio
import os
import sys

from ottla.coordinator import offset_store, transactions
from ottla.coordinator.loading import replay
from ottla.tools import cli

RELEASE = os.environ["OTTLA_TEST_RELEASE_LOADING"]


async def _replay_once_released(log, apply):  # type: ignore[no-untyped-def]
    while not os.path.exists(RELEASE):
        await asyncio.sleep(0.05)
    return await replay(log, apply)


transactions.replay = offset_store.replay = _replay_once_released  # type: ignore[attr-defined]

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:]))
