"""The Produce handler's check of a batch in one C call (`_records.accept_produced`)
against its Python twin (`records.accept_produced_in_python`, built from the checks the
handler makes itself): the same batches, good and bad, get the same answer, the parsed
header or None. A None sends the handler to its Python checks, which give the refusal's
error and message, so the C call may only ever accept what those checks accept."""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
import time

import crc32c
import pytest

from ottla.protocol import compiled_codec
from ottla.protocol.batch import (
    CONTROL_FLAG,
    HEADER_SIZE,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    build_batch,
    encode_record,
    recompressed,
)
from ottla.protocol.records import accept_produced_in_python

from .extensions import compiled_extension
from .test_records import DAMAGED, GOOD

LONG_MAX = 2**63 - 1
HOUR = 3_600_000
# max.message.bytes, segment.bytes, keys required, CreateTime checked, before, after:
# Kafka's defaults.
DEFAULTS = (1_048_588, 1 << 30, False, True, LONG_MAX, HOUR)


def _c():
    return compiled_extension("_records").accept_produced


def _now() -> int:
    return int(time.time() * 1000)


def _with_crc(batch: bytes | bytearray) -> bytes:
    """The batch with its CRC computed again (a damage the CRC cannot see)."""
    out = bytearray(batch)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def _patched(batch: bytes, fmt: str, offset: int, value: int, crc: bool = True) -> bytes:
    out = bytearray(batch)
    struct.pack_into(fmt, out, offset, value)
    return _with_crc(out) if crc else bytes(out)


def _raw_batch(section: bytes, count: int, **fields: int) -> bytes:
    """A batch holding `section` as its records, whatever they are, with a valid CRC."""
    built = build_batch([section], timestamp=fields.pop("timestamp", _now()), **fields)
    return _patched(built, ">i", 57, count) if count != 1 else built


def _batches() -> list[tuple[str, bytes, tuple]]:
    now = _now()
    good = build_batch(GOOD, timestamp=now)
    keyed = build_batch([encode_record(b"k%d" % i, b"v", offset_delta=i) for i in range(3)], timestamp=now)
    idempotent = build_batch([encode_record(None, b"v" * 100)], timestamp=now, producer_id=7, producer_epoch=1,
                             base_sequence=0)
    transactional = build_batch([encode_record(None, b"v")], timestamp=now, producer_id=7, producer_epoch=1,
                                base_sequence=5, attributes=TRANSACTIONAL_FLAG)
    cases: list[tuple[str, bytes, tuple]] = [
        ("good", good, DEFAULTS),
        ("good, keys required, one keyless", good, DEFAULTS[:2] + (True,) + DEFAULTS[3:]),
        ("keyed, keys required", keyed, DEFAULTS[:2] + (True,) + DEFAULTS[3:]),
        ("idempotent", idempotent, DEFAULTS),
        ("transactional", transactional, DEFAULTS),
        ("no timestamps checked", build_batch(GOOD, timestamp=1), DEFAULTS[:3] + (False,) + DEFAULTS[4:]),
        ("no timestamp (-1)", build_batch(GOOD, timestamp=-1, max_timestamp=-1), DEFAULTS),
        ("a day old, any age allowed", build_batch(GOOD, timestamp=now - 24 * HOUR), DEFAULTS),
        ("a day old, an hour allowed", build_batch(GOOD, timestamp=now - 24 * HOUR), DEFAULTS[:4] + (HOUR, HOUR)),
        ("a day ahead", build_batch(GOOD, timestamp=now + 24 * HOUR), DEFAULTS),
        ("max timestamp a day ahead", build_batch(GOOD, timestamp=now, max_timestamp=now + 24 * HOUR), DEFAULTS),
        ("the oldest timestamp", build_batch(GOOD, timestamp=-2**63), DEFAULTS),
        ("the newest timestamp", build_batch(GOOD, timestamp=LONG_MAX), DEFAULTS[:5] + (LONG_MAX,)),
        ("at max.message.bytes", good, (len(good),) + DEFAULTS[1:]),
        ("over max.message.bytes", good, (len(good) - 1,) + DEFAULTS[1:]),
        ("at segment.bytes", good, (DEFAULTS[0], len(good)) + DEFAULTS[2:]),
        ("over segment.bytes", good, (DEFAULTS[0], len(good) - 1) + DEFAULTS[2:]),
        ("none", None, DEFAULTS),  # type: ignore[list-item]
        ("empty", b"", DEFAULTS),
        ("shorter than offset and length", good[:11], DEFAULTS),
        ("shorter than a header", good[:40], DEFAULTS),
        ("one header, no records", good[:HEADER_SIZE], DEFAULTS),
        ("cut short", good[:-1], DEFAULTS),
        ("a byte too many", good + b"\x00", DEFAULTS),
        ("two batches", good + good, DEFAULTS),
        ("length below a header", _patched(good, ">i", 8, 20, crc=False), DEFAULTS),
        ("negative length", _patched(good, ">i", 8, -12, crc=False), DEFAULTS),
        ("magic 1", _patched(good, ">b", 16, 1, crc=False), DEFAULTS),
        ("magic 3", _patched(good, ">b", 16, 3, crc=False), DEFAULTS),
        ("CRC wrong", _patched(good, ">I", 17, 1, crc=False), DEFAULTS),
        ("a record byte flipped, CRC left", good[:-3] + bytes([good[-3] ^ 1]) + good[-2:], DEFAULTS),
        ("no records counted", _patched(good, ">i", 57, 0), DEFAULTS),
        ("negative count", _patched(good, ">i", 57, -1), DEFAULTS),
        ("offset delta against the count", _patched(good, ">i", 23, 5), DEFAULTS),
        ("control flag", _patched(good, ">h", 21, CONTROL_FLAG), DEFAULTS),
        ("producer id without sequence", _patched(idempotent, ">i", 53, -1), DEFAULTS),
        ("no producer id, no sequence", _patched(good, ">i", 53, -1), DEFAULTS),
        ("codec 5", _patched(good, ">h", 21, 5), DEFAULTS),
        ("codec 7", _patched(good, ">h", 21, 7), DEFAULTS),
    ]
    for codec in (1, 2, 3, 4):
        compressed = recompressed(good, BatchHeader.parse(good), codec, None, 1 << 24)
        cases.append((f"codec {codec}", compressed, DEFAULTS))
        # Compressed records are left to the handler (decompressed first): damaged ones
        # pass this check alike on both paths.
        cases.append((f"codec {codec}, damaged records", _patched(compressed, ">i", 57, 9)[:-1] + b"\x00",
                      DEFAULTS))
    for name, section, count, _message in DAMAGED:
        cases.append((f"records: {name}", _raw_batch(section, count), DEFAULTS))
    return cases


CASES = _batches()


@pytest.mark.parametrize("name,batch,limits", CASES, ids=[c[0] for c in CASES])
def test_both_paths_give_the_same_answer(name, batch, limits):
    expected = accept_produced_in_python(batch, *limits)
    got = _c()(batch, *limits)
    assert got == expected
    if expected is not None:
        assert type(got) is BatchHeader and got == BatchHeader.parse(batch)
        for buffer in (bytearray(batch), memoryview(batch)):
            assert _c()(buffer, *limits) == expected


def test_the_common_cases_are_accepted():
    # What the handler runs on, uncompressed or compressed, idempotent or transactional:
    # a check that answered None for all of them would compare equal and do nothing.
    accepted = {name for name, batch, limits in CASES if _c()(batch, *limits) is not None}
    assert {"good", "idempotent", "transactional", "keyed, keys required", "codec 1", "codec 4"} <= accepted


def test_mutated_batches_get_the_same_answer():
    """Random damage to good batches, with the CRC left or computed again (so that the
    walk meets the damage): 3,000 batches, seeded."""
    rng = random.Random(45)
    now = _now()
    sources = [build_batch(GOOD, timestamp=now),
               build_batch([encode_record(b"k", b"v" * rng.randrange(300), offset_delta=i,
                                          headers=[("h", b"x")] * (i % 3)) for i in range(20)], timestamp=now,
                           producer_id=3, producer_epoch=0, base_sequence=0)]
    for _ in range(3000):
        batch = bytearray(rng.choice(sources))
        for _ in range(rng.randrange(1, 4)):
            kind = rng.randrange(3)
            if kind == 0:
                batch[rng.randrange(len(batch))] = rng.randrange(256)
            elif kind == 1:
                del batch[rng.randrange(len(batch)):]
            else:
                at = rng.randrange(HEADER_SIZE, len(batch) + 1) if len(batch) > HEADER_SIZE else len(batch)
                batch[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5)))
        if rng.random() < 0.7 and len(batch) >= HEADER_SIZE:
            struct.pack_into(">i", batch, 8, len(batch) - 12)
            batch = bytearray(_with_crc(batch))
        data = bytes(batch)
        keys = rng.random() < 0.3
        limits = (DEFAULTS[0], DEFAULTS[1], keys) + DEFAULTS[3:]
        assert _c()(data, *limits) == accept_produced_in_python(data, *limits), data.hex()


def test_bounds_c_cannot_hold_are_left_to_the_python_checks():
    batch = build_batch(GOOD, timestamp=_now())
    for limits in ((2**64,) + DEFAULTS[1:], DEFAULTS[:4] + (-1, HOUR), DEFAULTS[:4] + (2**63, HOUR),
                   DEFAULTS[:5] + (-5,)):
        assert _c()(batch, *limits) is None
    with pytest.raises(TypeError):
        _c()(batch, *DEFAULTS[:-1])


def test_the_crc_is_the_crc32c_packages():
    c_crc = compiled_extension("_records").crc32c
    rng = random.Random(7)
    for size in [*range(0, 70), 1000, 4096, 100_000]:
        data = rng.randbytes(size)
        assert c_crc(data) == c_crc(data, True) == crc32c.crc32c(data)


@pytest.mark.parametrize("pure_python,expected", [("0", "compiled"), ("1", "python")], ids=["compiled", "python"])
def test_the_handler_takes_the_compiled_check_unless_told_otherwise(pure_python: str, expected: str) -> None:
    _c()  # built, or the module is skipped
    program = ("from ottla.protocol import _records, records\n"
               "print('compiled' if records.accept_produced is _records.accept_produced else "
               "'python' if records.accept_produced is None else 'neither')")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env={**os.environ, compiled_codec.PURE_PYTHON_VARIABLE: pure_python})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [expected]
