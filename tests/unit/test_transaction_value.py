"""The value of a `__transaction_state` record in one C call
(`_transaction_value.encode_value`) against its Python twin (`transaction_log.encode_value`,
the specification): the same record gives the same bytes, which decode back to it, and
what the twin refuses the C call refuses too, raising rather than crashing or writing."""

from __future__ import annotations

import random
import struct

import pytest

from ottla.coordinator.transaction_log import TxnRecord, TxnState, decode_value, encode_value

from .extensions import compiled_extension

_c = compiled_extension("_transaction_value", package="ottla.coordinator")


def _records() -> list[TxnRecord]:
    rng = random.Random(45)
    topics = ["orders", "a", "b", "é-topic", "t" * 249, "__consumer_offsets"]
    edges = [-1, 0, 1, 127, 128, 2**15 - 1, -(2**15)]
    records = [
        TxnRecord(7, 0, 60000, TxnState.EMPTY),  # no partitions: a null array
        TxnRecord(7, 0, 60000, TxnState.COMPLETE_COMMIT),  # no partitions: an empty array
        TxnRecord(7, 1, 60000, TxnState.ONGOING, frozenset({("orders", 0)}), 1000, 900),
        TxnRecord(2**63 - 1, 2**15 - 1, 2**31 - 1, TxnState.PREPARE_ABORT, frozenset({("b", 2**31 - 1), ("a", 0)}),
                  -(2**63), 2**63 - 1, 2**63 - 1, -(2**63), 2**15 - 1),
        TxnRecord(1, 2, 3, TxnState.EMPTY, frozenset({("x", -(2**31))}), 4, 5, 0, 0, -(2**15)),
        # More than the twin caches (16 a set), in many topics.
        TxnRecord(9, 3, 1000, TxnState.PREPARE_COMMIT,
                  frozenset((topic, p) for topic in topics for p in range(40)), 10, 5, -1, 11, 2),
    ]
    for _ in range(300):
        partitions = frozenset((rng.choice(topics), rng.randrange(-3, 300)) for _ in range(rng.randrange(0, 24)))
        records.append(TxnRecord(
            rng.choice([-1, 0, 5, 2**40, rng.randrange(-(2**63), 2**63)]), rng.choice(edges),
            rng.choice([1, 60000, 2**31 - 1]), rng.choice(list(TxnState)), partitions,
            rng.randrange(-(2**63), 2**63), rng.randrange(-1, 2**45), rng.choice([-1, 0, 2**40]),
            rng.choice([-1, 0, 2**40]), rng.choice([0, 0, 1, 2, -1])))
    return records


def test_the_same_record_makes_the_same_value():
    for record in _records():
        value = _c.encode_value(record)
        assert value == encode_value(record), record
        assert decode_value(value) == record


@pytest.mark.parametrize("record", [
    TxnRecord(2**63, 0, 1, TxnState.EMPTY),  # producer id past int64
    TxnRecord(1, 2**15, 1, TxnState.EMPTY),  # epoch past int16
    TxnRecord(1, 0, 2**31, TxnState.EMPTY),  # timeout past int32
    TxnRecord(1, 0, 1, 128),  # status past int8
    TxnRecord(1, 0, 1, TxnState.ONGOING, frozenset({("t", 2**31)})),  # partition past int32
    TxnRecord(1, 0, 1, TxnState.ONGOING, frozenset({("\udc80", 0)})),  # a topic UTF-8 cannot encode
    TxnRecord(1, 0, 1, TxnState.ONGOING, frozenset({("t", "0")})),  # a partition not an int
    TxnRecord(1, 0, 1, TxnState.ONGOING, frozenset({("t", 0), (1, 0)})),  # a topic not a str
    TxnRecord(1, 0, 1, TxnState.ONGOING, frozenset({("t", 0, 1)})),  # not a pair
    TxnRecord(1, 0, 1, TxnState.EMPTY, frozenset(), 1, 1, 2**63),  # previous producer id past int64
    TxnRecord(1, 0, 1, TxnState.EMPTY, frozenset(), 1, 1, -1, -1, 2**15),  # version past int16
    TxnRecord("1", 0, 1, TxnState.EMPTY),  # not an int
])
def test_what_the_twin_refuses_the_c_call_refuses(record):
    # The twin's struct raises struct.error where C raises ValueError or OverflowError.
    with pytest.raises((TypeError, ValueError, OverflowError, UnicodeError, struct.error)):
        encode_value(record)
    with pytest.raises((TypeError, ValueError, OverflowError, UnicodeError)):
        _c.encode_value(record)


def test_only_a_record_is_taken():
    for wrong in [(), (1, 2, 3), None, [*TxnRecord(1, 0, 1, TxnState.EMPTY)]]:
        with pytest.raises(TypeError):
            _c.encode_value(wrong)
