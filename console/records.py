"""The records of one partition, read for the Messages page: a bounded slice, each record
with what exactly-once says about it (committed, aborted, still open) and each marker as
a COMMIT or ABORT row.

How it reads, and why: through storage's tools read path, `PartitionLog.batches`, on the
event loop, one bounded slice per request (at most MAX_RECORDS records, MAX_SCAN_BYTES of
batches, at least one batch). Not over the wire as a client: a Fetch only returns what a
consumer may see, and the page must show what it may not (aborted records, the open
transaction past the LSO) with their producer ids and sequences. Not through
`PartitionLog.read` either, the fetch path: it remembers where each reader stopped (a
few positions per partition, kept for the consumers), and a console browsing old offsets
would push the consumers' positions out. A slice costs one index lookup and a few preads
of whole batches, which the event loop does for a Fetch too; the console asks for
nothing while no one has it open.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ottla.protocol.batch import Record, iter_records
from ottla.protocol.compression import EXPANSION_LIMIT
from ottla.protocol.control import parse_marker
from ottla.storage.log import PartitionLog

MAX_RECORDS = 500  # one page of the Messages page, at most
DEFAULT_RECORDS = 50
MAX_SCAN_BYTES = 4 * 1024 * 1024  # batches read for one page (one batch at least)


@dataclass(slots=True)
class Row:
    offset: int
    timestamp: int
    producer_id: int
    producer_epoch: int
    sequence: int
    transactional: bool
    # "record", or the marker's type for a control batch: "COMMIT" / "ABORT".
    kind: str = "record"
    # For a transactional record: "committed", "aborted" or "open" (its transaction has not
    # ended: past the LSO). None for a plain record.
    txn: str | None = None
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(slots=True)
class Slice:
    rows: list[Row] = field(default_factory=list)
    next_offset: int = 0  # where the next slice (or the live tail) starts
    hidden_aborted: int = 0  # aborted records a read_committed view leaves out
    log_start_offset: int = 0
    last_stable_offset: int = 0
    high_watermark: int = 0


def read_slice(log: PartitionLog, start: int, *, read_committed: bool, limit: int = DEFAULT_RECORDS) -> Slice:
    """Up to `limit` rows from `start` (moved into [log start, end]), bounded by the LSO
    for read_committed and the high watermark otherwise."""
    limit = max(1, min(limit, MAX_RECORDS))
    lso, hw = log.last_stable_offset, log.high_watermark
    upper = lso if read_committed else hw
    start = min(max(start, log.log_start_offset), upper)
    out = Slice(next_offset=start, log_start_offset=log.log_start_offset, last_stable_offset=lso, high_watermark=hw)
    if start >= upper:
        return out
    # The batches first (whole ones, within the bounds), then what is known of their
    # transactions: only the aborted ones these batches overlap are looked up.
    batches = []
    scanned = offsets = 0
    for header, batch in log.batches(start):
        if header.base_offset >= upper or offsets >= limit or (scanned and scanned + header.size > MAX_SCAN_BYTES):
            break
        batches.append((header, batch))
        scanned += header.size
        offsets += header.last_offset - max(header.base_offset, start) + 1
    if not batches:
        return out
    aborted: dict[int, list[tuple[int, int]]] = {}
    for entry in log.aborted_between(start, batches[-1][0].last_offset):
        aborted.setdefault(entry.producer_id, []).append((entry.first_offset, entry.last_offset))
    # Open transactions: a producer's records from its transaction's first offset on.
    open_from = dict(log.producer_state.ongoing_txns)
    max_decompressed = EXPANSION_LIMIT * log.config.max_message_bytes
    for header, batch in batches:
        if len(out.rows) >= limit:
            break
        pid, epoch = header.producer_id, header.producer_epoch
        if header.is_control:
            out.next_offset = header.last_offset + 1
            if header.base_offset >= start:
                out.rows.append(Row(header.base_offset, header.max_timestamp, pid, epoch, -1, True,
                                    kind=parse_marker(batch).type.name))
            continue
        for record in iter_records(batch, max_decompressed):
            if record.offset < start or record.offset >= upper:
                continue
            out.next_offset = record.offset + 1
            txn = _txn_status(header.is_transactional, pid, record.offset, aborted, open_from)
            if txn == "aborted" and read_committed:
                out.hidden_aborted += 1
                continue
            out.rows.append(_row(record, header.producer_id, epoch, header.is_transactional, txn))
            if len(out.rows) >= limit:
                break
        else:
            out.next_offset = max(out.next_offset, min(header.last_offset + 1, upper))
    return out


def _txn_status(transactional: bool, producer_id: int, offset: int,
                aborted: dict[int, list[tuple[int, int]]], open_from: dict[int, int]) -> str | None:
    if not transactional:
        return None
    if any(first <= offset <= last for first, last in aborted.get(producer_id, ())):
        return "aborted"
    first_open = open_from.get(producer_id)
    if first_open is not None and offset >= first_open:
        return "open"
    return "committed"


def _row(record: Record, producer_id: int, epoch: int, transactional: bool, txn: str | None) -> Row:
    return Row(record.offset, record.timestamp, producer_id, epoch, record.sequence, transactional, txn=txn,
               key=None if record.key is None else bytes(record.key),
               value=None if record.value is None else bytes(record.value),
               headers=record.headers)
