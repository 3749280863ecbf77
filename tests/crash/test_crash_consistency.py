"""Power loss, simulated: the broker's file operations recorded under a real workload
(tests/crash/harness.py), crash states built from them by the POSIX model of
recording.py, and Ottla started on each and checked (workload.check).

With --fsync no crash state may lose anything acknowledged. Without it, the states may
lose the unflushed tail (counted, reported) and nothing else: no duplicate, no record
out of order or never sent, no transaction partly visible, no aborted one visible, and
Ottla starts on every one, and no index entry points past its log. `python -m
tests.crash` runs thousands (make soak, make crash-soak).

Seen failing: with the partition directory's fsync taken out of
DirectorySync.descriptors (storage/directories.py, `if False and stamps[0] > ...`), a crash state keeping names
at random lost the 50 acknowledged records of each partition's rolled segment.
"""

from __future__ import annotations

import pytest

from .harness import explore, record

# About 0.5 s a state, two at a time (python -m tests.crash runs thousands).
FSYNC_STATES = 60
DEFAULT_MODE_STATES = 20


@pytest.mark.parametrize("fsync", [True, False], ids=["fsync", "default"])
def test_crash_states_keep_what_was_acknowledged(tmp_path, fsync):
    recorded = record(str(tmp_path), fsync=fsync)
    assert recorded.acks.produced and recorded.acks.transactions and recorded.acks.commits and recorded.acks.raw
    report = explore(recorded, str(tmp_path), FSYNC_STATES if fsync else DEFAULT_MODE_STATES, seed=44, jobs=2)
    print(report.summary())
    assert not report.violating, report.summary()
    if fsync:
        assert all(state.lost == 0 for state in report.states)


def test_everything_before_the_clean_shutdown_marker_is_durable(tmp_path):
    """A clean shutdown's marker tells the next start to trust every file unchecked: by
    the time it is written, nothing before it may still be at the mercy of a power loss
    (no write, truncation or name left unsynced). Seen failing with the active segment's
    last time index entry and the shutdown snapshot written after the logs' flush."""
    from ottla.testing import BrokerProcess
    from tests.clients import create_topic, idempotent_producer, produce_all

    from .recording import CREATE, Baseline, Recording, read_ops, shim_environment

    data_dir = str(tmp_path / "data")
    broker = BrokerProcess(data_dir, {"fsync.on.ack": "false"})
    broker.start()
    create_topic(broker.bootstrap, "t", 2, {"segment.bytes": "4096"})
    assert broker.stop() == 0
    baseline = Baseline.take(data_dir)
    log_path = str(tmp_path / "fs.log")
    broker = BrokerProcess(data_dir, {"fsync.on.ack": "false"}, env=shim_environment(data_dir, log_path))
    broker.start()
    try:
        produce_all(idempotent_producer(broker.bootstrap, **{"batch.size": 2000}),
                    [("t", i % 2, None, b"v" * 100) for i in range(200)])
    finally:
        assert broker.stop() == 0, broker.log()[-2000:]
    recording = Recording(baseline, read_ops(log_path))
    markers = [i for i, op in enumerate(recording.ops) if op.kind == CREATE and op.name == ".kafka_cleanshutdown"]
    assert len(markers) == 1, "one clean shutdown marker written"
    undecided = [op for op in recording.undecided(markers[0] - 1)]
    assert not undecided, "not durable when the marker was written:\n" + "\n".join(map(str, undecided[:20]))
