"""storage/common_append.py's append_common (its C twin, storage/_common_append.c, and its
Python specification) against PartitionLog.append_batch: over long random histories
(producers without an id, known and new, epochs bumped, sequences in order, repeated and
out of order, transactions open and closed by markers, segments rolling, index entries
due, flushes at flush.messages), a log appended through `append_common(...) or
append_batch(...)` answers, refuses, writes and remembers exactly what a log appended
through append_batch alone does, file for file."""

from __future__ import annotations

import os
import random
from types import SimpleNamespace
from typing import Any

import pytest

from ottla.protocol.batch import TRANSACTIONAL_FLAG, BatchHeader, build_batch, encode_record
from ottla.protocol.control import ControlType, EndTxnMarker
from ottla.protocol.errors import KafkaError
from ottla.storage import common_append
from ottla.storage import log as log_module
from ottla.storage.common_append import append_common_in_python
from ottla.storage.log import PartitionLog
from ottla.storage.log_config import LogConfig

from .extensions import compiled_extension

C = compiled_extension("_common_append", "ottla.storage")
NOW = 1_700_000_000_000


def test_the_produce_path_appends_with_the_c_append_common() -> None:
    pure = os.environ.get("OTTLA_PURE_PYTHON", "") not in ("", "0")
    assert common_append.append_common is (append_common_in_python if pure else C.append_common)


def _files(log: PartitionLog) -> dict[str, bytes]:
    found = {}
    for name in sorted(os.listdir(log.directory)):
        with open(os.path.join(log.directory, name), "rb") as f:
            found[name] = f.read()
    return found


def _state(log: PartitionLog) -> Any:
    manager = log.producer_state
    return (log.log_end_offset, log.unflushed_messages, dict(manager.ongoing_txns),
            [(s.base_offset, s.size, s.bytes_since_index_entry, s._max_timestamp, s.first_timestamp)
             for s in log.segments],
            {pid: (e.epoch, list(e.batches), e.current_txn_first_offset, e.last_timestamp)
             for pid, e in manager.producers.items()})


def _append(log: PartitionLog, data: bytes, header: BatchHeader, common: Any) -> Any:
    try:
        result = (common(log, data, header) if common else None) or log.append_batch(data, header)
    except KafkaError as exc:
        return ("refused", exc.code, exc.message)
    return tuple(result), type(result)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("path", ["c", "python"])
def test_append_common_appends_what_append_batch_appends(tmp_path, monkeypatch, seed: int, path: str) -> None:
    # Markers are stamped with the clock: the same in both logs.
    monkeypatch.setattr(log_module, "time", SimpleNamespace(time=lambda: NOW / 1000))
    rng = random.Random(seed)
    common = C.append_common if path == "c" else append_common_in_python
    config = LogConfig(segment_bytes=rng.choice([2_000, 20_000, 10**9]), segment_ms=rng.choice([50, 10**9]),
                       index_interval_bytes=rng.choice([0, 300, 4096]), flush_messages=rng.choice([7, 2**62, 2**64]))
    logs = [PartitionLog.create(str(tmp_path / name / "t-0"), "t", 0, config) for name in ("spec", "twin")]
    calls: list[list[tuple[str, int, Any]]] = [[], []]
    wanted = rng.choice([None, {("t", 0)}, set()])
    for log, seen in zip(logs, calls, strict=True):
        # What the log holds when a waiting Fetch is told: the producer's batch recorded
        # after the call in both, as append_batch does.
        log.on_append = lambda topic, partition, seen=seen, log=log: seen.append((topic, partition, _state(log)))
        log.appends_wanted = wanted
    epochs: dict[int, int] = {}
    sequences: dict[int, int] = {}
    mine = 0
    for step in range(300):
        pid = rng.choice([-1, 1, 1, 2, 2, 3])
        if pid >= 0 and rng.random() < 0.03:
            epochs[pid] = epochs.get(pid, 0) + 1
            sequences[pid] = 0
        epoch = epochs.setdefault(pid, 0) if pid >= 0 else -1
        if pid >= 0 and rng.random() < 0.05:
            marker = EndTxnMarker(rng.choice([ControlType.COMMIT, ControlType.ABORT]), 0)
            answers = []
            for log in logs:
                try:
                    answers.append(log.append_marker(pid, epoch, marker))
                except KafkaError as exc:
                    answers.append((exc.code, exc.message))
            assert answers[0] == answers[1]
            continue
        count = rng.choice([1, 1, 2, 10])
        seq = -1
        if pid >= 0:
            # A producer's first batch may start anywhere: near Int32.MAX its sequences wrap to 0.
            seq = sequences.setdefault(pid, rng.choice([0, 2**31 - 30]))
            roll = rng.random()
            if roll < 0.08:
                seq = max(0, seq - count)  # a retry, maybe of a batch cached
            elif roll < 0.12:
                seq += rng.choice([1, 5])  # a gap
            else:
                sequences[pid] = (seq + count) % 2**31
        timestamp = NOW + step * rng.choice([0, 1, 40])
        attributes = TRANSACTIONAL_FLAG if pid >= 0 and rng.random() < 0.3 else 0
        data = build_batch([encode_record(b"k%d" % i, os.urandom(rng.choice([10, 100, 400]))) for i in range(count)],
                           timestamp=timestamp, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           attributes=attributes)
        header = BatchHeader.parse(data)
        before = _state(logs[1])
        spec = _append(logs[0], data, header, None)
        twin_result = common(logs[1], data, header)
        if twin_result is None:
            assert _state(logs[1]) == before  # "not mine" changed nothing
            twin = _append(logs[1], data, header, None)
        else:
            mine += 1
            twin = tuple(twin_result), type(twin_result)
        assert twin == spec, step
        assert _state(logs[1]) == _state(logs[0]), step
        assert calls[1] == calls[0], step
    assert _files(logs[1]) == _files(logs[0])
    # An index entry due after every batch leaves nothing common; else most appends are.
    assert mine >= 10 if config.index_interval_bytes else mine == 0
    for log in logs:
        log.close()


def _common_and_logs(tmp_path: Any, path: str) -> tuple[Any, list[PartitionLog]]:
    """The append_common of `path`, and two empty logs: the specification's, the twin's."""
    common = C.append_common if path == "c" else append_common_in_python
    return common, [PartitionLog.create(str(tmp_path / name / "t-0"), "t", 0, LogConfig())
                    for name in ("spec", "twin")]


def _producer_batch(sequence: int) -> tuple[bytes, BatchHeader]:
    """One record of producer 7, epoch 0, at `sequence`."""
    data = build_batch([encode_record(b"k", b"v")], timestamp=NOW, producer_id=7, producer_epoch=0,
                       base_sequence=sequence)
    return data, BatchHeader.parse(data)


@pytest.mark.parametrize("path", ["c", "python"])
def test_a_failed_write_is_refused_as_append_batch_refuses_it(tmp_path, path: str) -> None:
    """A write the disk refuses (here a descriptor open for reading only) is the same
    KAFKA_STORAGE_ERROR, and leaves the same log, on both paths."""
    common, logs = _common_and_logs(tmp_path, path)
    answers = []
    for i in range(3):
        data, header = _producer_batch(i)
        if i == 2:
            for log in logs:
                active = log.segments[-1]
                os.close(active._fd)
                active._fd = os.open(active.log_path, os.O_RDONLY)
        answers.append((_append(logs[0], data, header, None), _append(logs[1], data, header, common)))
    assert [spec for spec, _ in answers] == [twin for _, twin in answers]
    assert answers[-1][0][0] == "refused" and answers[-1][0][2].startswith("write failed: [Errno 9]")
    assert _state(logs[1]) == _state(logs[0])
    assert _files(logs[1]) == _files(logs[0])


@pytest.mark.parametrize("path", ["c", "python"])
def test_timestamps_far_apart_roll_the_segment_as_append_batch_rolls_it(tmp_path, path: str) -> None:
    """A segment whose first timestamp is far below zero, then a batch near int64's top:
    their difference is past int64 (a roll in Python's ints, not a wrapped C one)."""
    common, logs = _common_and_logs(tmp_path, path)
    for i, timestamp in enumerate([-(2**62), -(2**62), 2**63 - 1]):
        data = build_batch([encode_record(b"k", b"v")], timestamp=timestamp, producer_id=-1)
        header = BatchHeader.parse(data)
        assert _append(logs[1], data, header, common) == _append(logs[0], data, header, None), i
    assert len(logs[0].segments) == 2
    assert _state(logs[1]) == _state(logs[0])
    assert _files(logs[1]) == _files(logs[0])


@pytest.mark.parametrize("path", ["c", "python"])
def test_a_log_missing_an_attribute_raises_before_the_producer_state_records(tmp_path, path: str) -> None:
    """A failed read of what on_append is called with is an error, as Python's
    AttributeError is, before the producer's batch is recorded: not an on_append
    left out and a batch recorded with an exception pending."""
    common, logs = _common_and_logs(tmp_path, path)
    answers = []
    for i in range(2):
        data, header = _producer_batch(i)
        if i == 1:
            for log in logs:
                log.on_append = lambda topic, partition: None
                log.appends_wanted = None
                del log.partition
        for log, how in zip(logs, (None, common), strict=True):
            try:
                answers.append(_append(log, data, header, how))
            except AttributeError as exc:
                answers.append(("raised", str(exc)))
    assert answers[2][0] == "raised" and answers[2] == answers[3]
    assert _state(logs[1]) == _state(logs[0])
