"""A coordinator's batch in one C call (`_coordinator_batch.records_batch`) against its
Python twin (`batch.records_batch`, the specification): the same records give the same
batch and the same header, and what the twin refuses the C call refuses too, raising
rather than crashing or writing a batch."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

from ottla.protocol import batch as batch_module
from ottla.protocol.batch import BatchHeader, iter_records, records_batch

from .extensions import compiled_extension

_c = compiled_extension("_coordinator_batch")


def _both(*args):
    return _c.records_batch(*args), records_batch(*args)


def test_the_same_records_make_the_same_batch_and_header():
    rng = random.Random(45)
    sizes = [0, 1, 63, 64, 127, 128, 1023, 1024, 8191, 8192, 70_000]
    cases = [
        [],  # no record: the twin makes an empty batch, so does C (no coordinator writes one)
        [(b"k", b"v")],
        [[b"k", b"v"]],  # a list for a pair, as the twin unpacks it
        [(b"", b"")],
        [(b"key", None)],  # a tombstone
        [(b"k" * size, b"v" * size) for size in sizes],  # lengths of one to three varint bytes
        [(b"k%d" % i, None if i % 3 == 0 else b"v" * i) for i in range(200)],  # offset deltas past 63 and 8191/2
    ]
    for _ in range(200):
        cases.append([(rng.randbytes(rng.choice(sizes)),
                       None if rng.random() < 0.2 else rng.randbytes(rng.choice(sizes)))
                      for _ in range(rng.randint(1, 5))])
    arguments = [(5,), (1_700_000_000_000, 7, 2, 0x10), (-1, -1, -1, 0), (2**63 - 1, 2**63 - 1, 2**15 - 1, 0x30),
                 (-(2**63), 0, -(2**15), -1), (42, 3000)]
    for records in cases:
        for extra in arguments:
            (c_batch, c_header), (py_batch, py_header) = _both(records, *extra)
            assert c_batch == py_batch, (records[:2], extra)
            assert c_header == py_header == BatchHeader.parse(py_batch), (records[:2], extra)
            assert type(c_header) is BatchHeader
    # And every reader decodes it back.
    (c_batch, _), _ = _both(cases[6], 5)
    assert [(r.key, r.value, r.offset) for r in iter_records(c_batch)] == [
        (k, v, i) for i, (k, v) in enumerate(cases[6])]


@pytest.mark.parametrize("args", [
    ((b"k", b"v"), 5),  # not a list
    ([(b"k", b"v", b"x")], 5),  # not a pair
    ([[b"k", b"v", b"x"]], 5),  # a list, not a pair
    ([("k", b"v")], 5),  # a str key
    ([(None, b"v")], 5),  # no key
    ([(b"k", "v")], 5),  # a str value
    ([(b"k", b"v")], 2**63),  # a timestamp past int64
    ([(b"k", b"v")], 5, 2**63),  # a producer id past int64
    ([(b"k", b"v")], 5, 1, 2**15),  # an epoch past int16
    ([(b"k", b"v")], 5, 1, 0, 2**15),  # attributes past int16
    ([(b"k", b"v")], "5"),  # not a number
    ([(b"k", b"v")],),  # no timestamp
    ([(b"k", b"v")], 5, 1, 0, 0, 0),  # one argument too many
])
def test_what_the_twin_refuses_the_c_call_refuses(args):
    with pytest.raises(Exception):  # noqa: B017 - the twin's error types differ (struct.error, TypeError)
        records_batch(*args)
    with pytest.raises((TypeError, ValueError, OverflowError)):
        _c.records_batch(*args)


def test_the_coordinators_call_the_c_twin_unless_the_python_path_is_asked_for():
    pure = os.environ.get("OTTLA_PURE_PYTHON", "") not in ("", "0")
    assert batch_module.coordinator_batch is (records_batch if pure else _c.records_batch)
    script = "from ottla.protocol import batch; print(batch.coordinator_batch is batch.records_batch)"
    answer = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                            env={**os.environ, "OTTLA_PURE_PYTHON": "1"})
    assert answer.stdout.strip() == "True"
