"""Run the broker so that it dies right after a PrepareCommit or PrepareAbort is in
`__transaction_state`, before any marker is written: the crash between the two phases
of ending a transaction, for the restart test in tests/integration/test_transactions.py.

Started by `BrokerProcess(launcher=...)` with the arguments of `ottla serve`; the hook
lives here, in the tests, and the shipped coordinator knows nothing of it.
"""

from __future__ import annotations

import os
import sys

from ottla.coordinator.transaction_log import TxnState
from ottla.coordinator.transactions import TransactionCoordinator
from ottla.tools import cli

EXIT_CODE = 17  # what the test expects, to tell this exit from any other death
_PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
_persist = TransactionCoordinator._persist


def _persist_then_crash(self, txn_id, record):
    persisted = _persist(self, txn_id, record)
    if record.state in _PREPARED:
        # No cleanup, no flush beyond what the append did: as a kill -9 would leave it.
        os._exit(EXIT_CODE)
    return persisted


TransactionCoordinator._persist = _persist_then_crash  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:]))
