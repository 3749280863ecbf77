"""Power loss, simulated: the broker's file operations recorded under a real workload
(tests/crash/harness.py), crash states built from them by the POSIX model of
recording.py, and Ottla started on each and checked (workload.check).

With --fsync no crash state may lose anything acknowledged. Without it, the states may
lose the unflushed tail (counted, reported) and nothing else: no duplicate, no record
out of order or never sent, no transaction partly visible, no aborted one visible, and
Ottla starts on every one. `python -m tests.crash` runs thousands (make crash-soak).

Seen failing: with the partition directory's fsync taken out of
PartitionLog.unflushed_files (`if False and own > ...`), a crash state keeping names
at random lost the 50 acknowledged records of each partition's rolled segment.
"""

from __future__ import annotations

import pytest

from .harness import explore, record

FSYNC_STATES = 20
DEFAULT_MODE_STATES = 6


@pytest.mark.parametrize("fsync", [True, False], ids=["fsync", "default"])
def test_crash_states_keep_what_was_acknowledged(tmp_path, fsync):
    recorded = record(str(tmp_path), fsync=fsync)
    assert recorded.acks.produced and recorded.acks.transactions and recorded.acks.commits and recorded.acks.raw
    report = explore(recorded, str(tmp_path), FSYNC_STATES if fsync else DEFAULT_MODE_STATES, seed=44)
    print(report.summary())
    assert not report.violating, report.summary()
    if fsync:
        assert all(state.lost == 0 for state in report.states)
