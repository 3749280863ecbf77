"""The lengths and counts of a request body are checked against its frame before kio
reads it (protocol/request_bounds.py)."""

from __future__ import annotations

import random

import pytest

from ottla.protocol.codec import MalformedRequest, decode_request, request_class
from ottla.protocol.request_bounds import LengthError, check_request_body
from tests.schema_samples import every_supported_request, sample_body, sample_request

METADATA, PRODUCE = 3, 0


@pytest.mark.parametrize(("api_key", "version"), every_supported_request())
def test_every_well_formed_request_passes_and_decodes(api_key: int, version: int) -> None:
    """The bounds check passes the body, and the decoder gives back the very request
    that was encoded (not merely no error).

    Checked by breaking it: with the compiled writer sending durations in seconds
    (protocol/compiled_writers.py: `total_seconds()` without `* 1000`), 68 API versions
    fail here, where the old "decodes without error" passed all 219."""
    cls = request_class(api_key, version)
    rng = random.Random(api_key * 100 + version)
    for _ in range(3):
        sample, body = sample_request(api_key, version, rng)
        check_request_body(cls, body, 0)
        assert decode_request(cls, body, 0) == sample


@pytest.mark.parametrize(("api_key", "version"), every_supported_request())
def test_every_truncation_is_refused_not_allocated(api_key: int, version: int) -> None:
    cls = request_class(api_key, version)
    body = sample_body(api_key, version, random.Random(version))
    for cut in range(len(body)):
        with pytest.raises(MalformedRequest):
            decode_request(cls, body[:cut], 0)


def test_the_twenty_byte_request_that_claimed_four_billion_topics() -> None:
    # Metadata v9: a compact array of 4,294,967,295 - 1 topics, and nothing after it.
    with pytest.raises(LengthError, match="array of 4294967294 elements"):
        check_request_body(request_class(METADATA, 9), b"\xff\xff\xff\xff\x0f", 0)
    with pytest.raises(MalformedRequest):
        decode_request(request_class(METADATA, 9), b"\xff\xff\xff\xff\x0f", 0)


def test_a_legacy_count_or_length_beyond_the_frame() -> None:
    # Metadata v1: int32 topic count.
    with pytest.raises(LengthError):
        check_request_body(request_class(METADATA, 1), b"\x7f\xff\xff\xff" + b"\x00\x01a", 0)
    # Produce v3: null transactional id, acks, timeout, one topic "t" with one partition
    # whose records claim 2 GiB.
    body = (b"\xff\xff" + b"\xff\xff" + b"\x00\x00\x75\x30" + b"\x00\x00\x00\x01" + b"\x00\x01t"
            + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00" + b"\x7f\xff\xff\xff" + b"\x00" * 10)
    with pytest.raises(LengthError, match="string or bytes"):
        check_request_body(request_class(PRODUCE, 3), body, 0)


def test_null_for_an_array_that_cannot_be_null() -> None:
    # DeleteTopics v1: topic_names (an int32 array, not nullable) as -1, then a timeout.
    with pytest.raises(LengthError, match="cannot be null"):
        check_request_body(request_class(20, 1), b"\xff\xff\xff\xff\x00\x00\x75\x30", 0)
