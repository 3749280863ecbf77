"""The `.txnindex` of a segment: one entry per transaction aborted in it.

Kafka's 34-byte entry: version int16 (0), producerId int64, firstOffset int64,
lastOffset int64, lastStableOffset int64. A read_committed Fetch gets its list of
aborted transactions from here instead of scanning the log for markers.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

_ENTRY = struct.Struct(">hqqqq")
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._pending = bytearray()
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data[: len(data) - len(data) % _ENTRY.size]):
            if version == VERSION:
                self.entries.append(AbortedTxn(pid, first, last, lso))

    def append(self, entry: AbortedTxn) -> None:
        self.entries.append(entry)
        self._pending += _ENTRY.pack(VERSION, entry.producer_id, entry.first_offset, entry.last_offset,
                                     entry.last_stable_offset)

    def overlapping(self, first: int, last: int) -> list[AbortedTxn]:
        """Aborted transactions that hold any offset in [first, last]."""
        return [e for e in self.entries if e.last_offset >= first and e.first_offset <= last]

    def flush(self) -> None:
        if self._pending:
            with open(self.path, "ab") as f:
                f.write(self._pending)
            self._pending.clear()

    def truncate_to(self, offset: int) -> None:
        self.entries = [e for e in self.entries if e.last_offset < offset]
        self._pending.clear()
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            for e in self.entries:
                f.write(_ENTRY.pack(VERSION, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset))
        os.replace(tmp, self.path)

    def reset(self) -> None:
        self.entries = []
        self.truncate_to(-1)

    def delete(self) -> None:
        self._pending.clear()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
