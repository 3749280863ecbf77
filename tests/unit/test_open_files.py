"""Segments keep their files open within a budget, least recently used closed first
(storage/open_files.py)."""

from __future__ import annotations

import time

from ottla.protocol.batch import build_batch, encode_record
from ottla.storage import open_files
from ottla.storage.segment import LogSegment


def _budget(monkeypatch) -> open_files.OpenFiles:
    """A budget of two descriptors, the segments' for this test."""
    budget = open_files.OpenFiles(2)
    monkeypatch.setattr("ottla.storage.segment.OPEN_FILES", budget)
    return budget


def _segment(tmp_path, i: int) -> LogSegment:
    directory = tmp_path / f"t-{i}"
    directory.mkdir()
    return LogSegment(str(directory), 0)


def _append(segment: LogSegment, value: bytes) -> None:
    batch = build_batch([encode_record(None, value, offset_delta=0)], timestamp=int(time.time() * 1000))
    segment.append(batch, len(batch), 0, 0, 0, 4096)


def test_only_the_most_recently_used_segments_hold_descriptors(tmp_path, monkeypatch):
    budget = _budget(monkeypatch)
    segments = []
    for i in range(5):
        segment = _segment(tmp_path, i)
        _append(segment, b"v%d" % i)
        segments.append(segment)
    open_now = [s for s in segments if s._fd is not None]
    assert open_now == segments[-2:] and len(budget) == 2
    # A closed segment reopens on use, and the least recently used one closes instead.
    assert b"v0" in segments[0].pread(200, 0)
    assert segments[0]._fd is not None and segments[3]._fd is None
    for segment in segments:
        segment.close()
    assert len(budget) == 0


def test_an_append_makes_its_segment_the_most_recently_used(tmp_path, monkeypatch):
    # segment.append reads its descriptor without the `fd` property: it touches the
    # budget itself, so the segment written to is the last one closed.
    _budget(monkeypatch)
    segments = [_segment(tmp_path, 0), _segment(tmp_path, 1)]
    _append(segments[0], b"v")  # open, and now the most recently used
    segments.append(_segment(tmp_path, 2))  # one too many: the least recently used closes
    assert segments[0]._fd is not None and segments[1]._fd is None
    for segment in segments:
        segment.close()
