"""Decompression within a bound (protocol/compression.py)."""

from __future__ import annotations

import gzip

import cramjam
import pytest

from ottla.protocol.compression import DecompressionError, decompress

SAMPLE = b"a record section " * 500
COMPRESS = {
    1: lambda d: gzip.compress(d),
    2: lambda d: bytes(cramjam.snappy.compress_raw(d)),
    3: lambda d: bytes(cramjam.lz4.compress(d)),
    4: lambda d: bytes(cramjam.zstd.compress(d)),
}


def _xerial(data: bytes, block: int = 1000) -> bytes:
    """Snappy in the Java client's framing: a 16-byte header, then length-prefixed blocks."""
    out = b"\x82SNAPPY\x00" + bytes(8)
    for i in range(0, len(data), block):
        chunk = bytes(cramjam.snappy.compress_raw(data[i:i + block]))
        out += len(chunk).to_bytes(4, "big") + chunk
    return out


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_within_the_bound_it_is_the_data(codec: int) -> None:
    assert decompress(codec, COMPRESS[codec](SAMPLE), len(SAMPLE)) == SAMPLE


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_one_byte_over_the_bound_is_refused(codec: int) -> None:
    with pytest.raises(DecompressionError):
        decompress(codec, COMPRESS[codec](SAMPLE), len(SAMPLE) - 1)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_and_truncation_are_refused(codec: int) -> None:
    with pytest.raises(DecompressionError):
        decompress(codec, b"\x00garbage\xff" * 3, 1 << 20)
    with pytest.raises(DecompressionError):
        decompress(codec, COMPRESS[codec](SAMPLE)[:-7], 1 << 20)


def test_xerial_snappy_is_read_and_bounded_block_by_block() -> None:
    framed = _xerial(SAMPLE)
    assert decompress(2, framed, len(SAMPLE)) == SAMPLE
    with pytest.raises(DecompressionError, match="more than"):
        decompress(2, framed, len(SAMPLE) - 1)
