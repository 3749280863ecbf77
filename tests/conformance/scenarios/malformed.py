"""Malformed and oversize input: bodies that do not decode, lengths and counts that run
past the frame, a batch larger than the topic allows, damaged batches. Kafka closes the
connection on a request it cannot parse; what a broker answers to the rest is compared."""

from __future__ import annotations

import struct

from ottla.protocol.batch import CRC_OFFSET

from ..harness import Scenario, Step
from .common import FETCH, METADATA, PRODUCE, batch, create, produce


def damaged_crc(records: bytes) -> bytes:
    crc = struct.unpack_from(">I", records, CRC_OFFSET)[0]
    return records[:CRC_OFFSET] + struct.pack(">I", crc ^ 1) + records[CRC_OFFSET + 4:]


SCENARIOS = [
    Scenario("malformed", [
        create("create", 1, {"max.message.bytes": "1000"}),
        Step("metadata-truncated", METADATA, 1, raw=b"\x00\x00\x00\x05\x00"),
        Step("metadata-negative-count", METADATA, 1, raw=struct.pack(">i", -7)),
        Step("metadata-string-past-frame", METADATA, 1, raw=struct.pack(">ih", 1, 3000) + b"abc"),
        Step("metadata-huge-count", METADATA, 9, raw=b"\xff\xff\xff\xff\x0f"),
        Step("fetch-empty-body", FETCH, 12, raw=b""),
        Step("unknown-api-key", 999, 0, raw=b"\x00"),
        Step("produce-oversize-batch", PRODUCE, 9, lambda c: produce(c.topic(), 0, batch([b"x" * 2000]))),
        Step("produce-records-over-segment-bytes-ok", PRODUCE, 9, lambda c: produce(c.topic(), 0, batch([b"ok"]))),
        Step("produce-bad-crc", PRODUCE, 9, lambda c: produce(c.topic(), 0, damaged_crc(batch([b"crc"])))),
        Step("produce-truncated-batch", PRODUCE, 9, lambda c: produce(c.topic(), 0, batch([b"cut"])[:-3])),
        Step("produce-no-records", PRODUCE, 9, lambda c: produce(c.topic(), 0, b"")),
        Step("produce-magic-1", PRODUCE, 9, lambda c: produce(
            c.topic(), 0, batch([b"m"])[:16] + b"\x01" + batch([b"m"])[17:])),
        Step("produce-transactional-without-id", PRODUCE, 9, lambda c: produce(
            c.topic(), 0, batch([b"t"], 5, 0, 0, transactional=True))),
        Step("produce-after", PRODUCE, 9, lambda c: produce(c.topic(), 0, batch([b"after"]))),
    ]),
]
