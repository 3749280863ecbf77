"""The sparse `.index` (offset -> file position) and `.timeindex` (timestamp -> offset)
of one segment, in Kafka's file format.

`.index`     8-byte entries: relative offset int32, position int32
`.timeindex` 12-byte entries: timestamp int64, relative offset int32

Entries are added every `log.index.interval.bytes` of log, so an index stays small
(a 1 GiB segment at 4 KiB intervals holds at most 256 Ki entries) and is kept in memory
as arrays for bisecting. Each entry is written to the file as it is added (one small
write per 4 KiB of log; Kafka's memory-mapped files are just as current). The files
carry no checksum: after a crash they are rebuilt from the log, which is the truth.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right

from .directories import directory_changed, open_or_create

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def _whole_entries(data: bytes, entry: struct.Struct) -> bytes:
    # A torn last entry (crash mid-write) is dropped.
    return data[: len(data) - len(data) % entry.size]


def read_offset_index_file(path: str, base_offset: int) -> list[tuple[int, int]]:
    """The (offset, position) entries of an `.index` file as stored, unchecked, without
    opening it for writing (for dump-log)."""
    with open(path, "rb") as f:
        data = _whole_entries(f.read(), _OFFSET_ENTRY)
    return [(base_offset + rel, pos) for rel, pos in _OFFSET_ENTRY.iter_unpack(data)]


def read_time_index_file(path: str, base_offset: int) -> list[tuple[int, int]]:
    """The (timestamp, offset) entries of a `.timeindex` file as stored (for dump-log)."""
    with open(path, "rb") as f:
        data = _whole_entries(f.read(), _TIME_ENTRY)
    return [(ts, base_offset + rel) for ts, rel in _TIME_ENTRY.iter_unpack(data)]


class _SparseIndex:
    ENTRY: struct.Struct
    # The names of the in-memory arrays holding the entries, one per field of ENTRY.
    COLUMNS: tuple[str, str]

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        # While recovery rebuilds the entries (start_rebuild), they are kept in memory
        # only, and finish_rebuild writes the file once.
        self.rebuilding = False
        # When the file was created (see directories.py), 0 if it was there.
        self.directory_stamp = 0
        self._fd: int | None = self._open()

    def _open(self) -> int:
        # Created empty if missing, as Kafka does; then its directory entry is to be
        # synced with the next flush.
        fd, created = open_or_create(self.path, os.O_RDWR | os.O_APPEND)
        if created:
            self.directory_stamp = directory_changed()
        return fd

    @property
    def fd(self) -> int:
        """The file's descriptor, reopened if its segment let go of it (open_files.py)."""
        if self._fd is None:
            self._fd = self._open()
        return self._fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _read_entries(self) -> bytes:
        size = os.fstat(self.fd).st_size
        if size == 0:  # no entry yet (a segment shorter than log.index.interval.bytes)
            return b""
        return _whole_entries(os.pread(self.fd, size, 0), self.ENTRY)

    def _write(self, *fields: int) -> None:
        os.write(self.fd, self.ENTRY.pack(*fields))

    def _rewrite(self, data: bytes) -> None:
        os.ftruncate(self.fd, 0)
        if data:
            os.write(self.fd, data)

    def _entries_bytes(self) -> bytes:
        columns = [getattr(self, name) for name in self.COLUMNS]
        return b"".join(self.ENTRY.pack(*fields) for fields in zip(*columns, strict=True))

    def start_rebuild(self, keep: int) -> None:
        """Keep the first `keep` entries and take new ones in memory only, until
        finish_rebuild (recovery re-indexes what follows them)."""
        for name in self.COLUMNS:
            del getattr(self, name)[keep:]
        self.rebuilding = True

    def finish_rebuild(self) -> None:
        """Make the file hold the rebuilt entries, writing only where it differs. After
        a kill -9 it mostly holds them already (entries are written with their
        batches), and rewriting every index costs two ftruncates a segment, a good
        part of the recovery of many partitions."""
        self.rebuilding = False
        expected = self._entries_bytes()
        on_disk = os.pread(self.fd, os.fstat(self.fd).st_size, 0)
        if on_disk == expected:
            return
        if on_disk.startswith(expected):
            os.ftruncate(self.fd, len(expected))
        elif expected.startswith(on_disk):
            os.write(self.fd, expected[len(on_disk):])
        else:
            self._rewrite(expected)

    def keep_first(self, count: int) -> None:
        """Drop every entry after the first `count` (undoing entries just appended)."""
        for name in self.COLUMNS:
            del getattr(self, name)[count:]
        os.ftruncate(self.fd, count * self.ENTRY.size)

    def close(self) -> None:
        self.release()

    def delete(self) -> None:
        self.release()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class OffsetIndex(_SparseIndex):
    ENTRY = _OFFSET_ENTRY
    COLUMNS = ("relative_offsets", "positions")

    def __init__(self, path: str, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self.relative_offsets = array("i")
        self.positions = array("i")
        for rel, pos in self.ENTRY.iter_unpack(self._read_entries()):
            self._add(rel, pos)

    def _add(self, rel: int, pos: int) -> bool:
        # Entries must grow strictly; anything else is a damaged file.
        if self.relative_offsets and (rel <= self.relative_offsets[-1] or pos <= self.positions[-1]):
            return False
        self.relative_offsets.append(rel)
        self.positions.append(pos)
        return True

    def __len__(self) -> int:
        return len(self.relative_offsets)

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._add(rel, position) and not self.rebuilding:
            self._write(rel, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The last entry at or before `offset` as (offset, position); the segment start
        if there is none."""
        i = bisect_right(self.relative_offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[i], self.positions[i]

    def last_entry(self) -> tuple[int, int]:
        """The last entry as (offset, position); the segment start if there is none."""
        if not self.positions:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[-1], self.positions[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        del self.relative_offsets[self.entries_before(offset):]
        del self.positions[len(self.relative_offsets):]
        self._rewrite(self._entries_bytes())

    def entries_before(self, offset: int) -> int:
        """How many entries are for offsets < `offset`."""
        return bisect_right(self.relative_offsets, offset - self.base_offset - 1)


class TimeIndex(_SparseIndex):
    ENTRY = _TIME_ENTRY
    COLUMNS = ("timestamps", "relative_offsets")

    def __init__(self, path: str, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self.timestamps = array("q")
        self.relative_offsets = array("i")
        for ts, rel in self.ENTRY.iter_unpack(self._read_entries()):
            self._add(ts, rel)

    def _add(self, timestamp: int, rel: int) -> bool:
        if self.timestamps and (timestamp <= self.timestamps[-1] or rel < self.relative_offsets[-1]):
            return False
        self.timestamps.append(timestamp)
        self.relative_offsets.append(rel)
        return True

    def __len__(self) -> int:
        return len(self.timestamps)

    def last_entry(self) -> tuple[int, int]:
        """The last entry as (timestamp, offset); (-1, -1) if there is none."""
        if not self.timestamps:
            return -1, -1
        return self.timestamps[-1], self.base_offset + self.relative_offsets[-1]

    def append(self, timestamp: int, offset: int) -> None:
        rel = offset - self.base_offset
        if self._add(timestamp, rel) and not self.rebuilding:
            self._write(timestamp, rel)

    def lookup(self, timestamp: int) -> int:
        """An offset from which a scan finds the first batch with a timestamp >=
        `timestamp`: the entry before the first entry at or past it."""
        i = bisect_right(self.timestamps, timestamp - 1) - 1
        if i < 0:
            return self.base_offset
        return self.base_offset + self.relative_offsets[i]

    def truncate_to(self, offset: int) -> None:
        keep = self.entries_before(offset)
        del self.timestamps[keep:]
        del self.relative_offsets[keep:]
        self._rewrite(self._entries_bytes())

    def entries_before(self, offset: int) -> int:
        """How many entries are for offsets < `offset`."""
        keep = len(self.relative_offsets)
        while keep and self.base_offset + self.relative_offsets[keep - 1] >= offset:
            keep -= 1
        return keep
