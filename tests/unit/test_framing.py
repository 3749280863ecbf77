"""Splitting a byte stream into frames."""

from __future__ import annotations

import struct

import pytest

from ottla.protocol.framing import FrameError, FrameReader


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize("chunk", [1, 3, 4, 5, 7, 64, 10_000])
def test_frames_come_out_whole_whatever_the_chunking(chunk):
    bodies = [b"a" * 10, b"", b"b" * 3000, b"c"]
    stream = b"".join(framed(b) for b in bodies)
    reader = FrameReader(max_bytes=1 << 20)
    got = []
    for i in range(0, len(stream), chunk):
        got += [bytes(f) for f in reader.feed(stream[i : i + chunk])]
    assert got == bodies


def test_a_frame_inside_one_chunk_is_a_view_not_a_copy():
    data = framed(b"x" * 100) + framed(b"y" * 5)
    frames = FrameReader(1 << 20).feed(data)
    assert [f.obj is data for f in frames] == [True, True]
    assert all(f.readonly for f in frames)


@pytest.mark.parametrize("prefix", [struct.pack(">i", -1), struct.pack(">i", 2000)])
def test_sizes_are_checked_before_anything_is_buffered(prefix):
    with pytest.raises(FrameError):
        FrameReader(max_bytes=1000).feed(prefix + b"body")
    reader = FrameReader(max_bytes=1000)
    reader.feed(prefix[:2])
    with pytest.raises(FrameError):
        reader.feed(prefix[2:])
