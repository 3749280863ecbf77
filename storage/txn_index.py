"""The `.txnindex` of a segment: one entry per transaction aborted in it.

Kafka's 34-byte entry: version int16 (0), producerId int64, firstOffset int64,
lastOffset int64, lastStableOffset int64. A read_committed Fetch gets its list of
aborted transactions from here instead of scanning the log for markers.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from .directories import directory_changed, open_or_create

_ENTRY = struct.Struct(">hqqqq")
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """Entries are written as they are added. The file is created with the first
    aborted transaction, as Kafka does; most segments never have one."""

    def __init__(self, path: str, exists: bool = True) -> None:
        """`exists` False: the caller knows the file is absent (not looked for)."""
        self.path = path
        self.fd: int | None = None
        self.directory_stamp = 0  # when the file was created (directories.py)
        self.entries: list[AbortedTxn] = []
        if exists:
            try:
                self.entries = read_txn_index_file(path)
            except FileNotFoundError:
                pass

    def _file(self) -> int:
        if self.fd is None:
            self.fd, created = open_or_create(self.path, os.O_RDWR | os.O_APPEND)
            if created:
                # The first ABORT of the segment: a flush must sync the directory too,
                # or a power loss takes the file with its entries while the marker,
                # behind the recovery point, is never re-indexed.
                self.directory_stamp = directory_changed()
            # A crash mid-write leaves a torn last entry (read past when loading): cut
            # it off, or the entries appended next would be read askew.
            size = os.fstat(self.fd).st_size
            if size % _ENTRY.size:
                os.ftruncate(self.fd, size - size % _ENTRY.size)
        return self.fd

    def append(self, entry: AbortedTxn) -> None:
        self.entries.append(entry)
        os.write(self._file(), _pack(entry))

    def has_entry(self, producer_id: int, marker_offset: int) -> bool:
        """Whether the transaction a producer's ABORT marker at `marker_offset` closed is
        here."""
        return any(e.last_offset == marker_offset and e.producer_id == producer_id for e in self.entries)

    def overlapping(self, first: int, last: int) -> list[AbortedTxn]:
        """Aborted transactions that hold any offset in [first, last]."""
        return [e for e in self.entries if e.last_offset >= first and e.first_offset <= last]

    def truncate_to(self, offset: int) -> None:
        """Forget transactions whose marker is at or past `offset`."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) == len(self.entries):
            return
        self.entries = kept
        fd = self._file()
        os.ftruncate(fd, 0)
        if kept:
            os.write(fd, b"".join(_pack(e) for e in kept))

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def read_txn_index_file(path: str) -> list[AbortedTxn]:
    """The entries of a `.txnindex` file (a torn last entry and unknown versions are
    skipped). Raises FileNotFoundError if there is none."""
    with open(path, "rb") as f:
        data = f.read()
    return [
        AbortedTxn(pid, first, last, lso)
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data[: len(data) - len(data) % _ENTRY.size])
        if version == VERSION
    ]


def _pack(entry: AbortedTxn) -> bytes:
    return _ENTRY.pack(VERSION, entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset)
