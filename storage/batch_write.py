"""Writing a batch to a segment's log file with the offset and leader epoch the log gives
it: the append path's write (LogSegment.append).

`write_batch_in_python` is the specification: the batch's first 16 bytes (baseOffset,
batchLength, partitionLeaderEpoch, none covered by the CRC) replaced, the rest written
as it came, in one os.writev; it answers the bytes written. `write_batch` is its twin in
C (storage/_batch_write.c), which makes none of the list, bytes and memoryviews this
makes a batch; it is used unless it could not be built (no C compiler at install time)
or OTTLA_PURE_PYTHON=1 asks for the Python path. tests/unit/test_batch_write.py holds
the two to the same answers and the same files.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ottla.protocol.batch import with_offset_and_epoch

WriteBatch = Callable[[int, "bytes | memoryview", int, int], int]


def write_batch_in_python(fd: int, batch: bytes | memoryview, base_offset: int, leader_epoch: int) -> int:
    """Write `batch` to `fd` (opened O_APPEND) with `base_offset` and `leader_epoch` in
    its header; the bytes written, as os.writev answers them."""
    return os.writev(fd, with_offset_and_epoch(batch, base_offset, leader_epoch))


try:
    from ._batch_write import write_batch as _write_batch_in_c
except ImportError:  # installed without a C compiler: the Python write
    _write_batch_in_c = None

write_batch: WriteBatch = (
    _write_batch_in_c if _write_batch_in_c is not None and os.environ.get("OTTLA_PURE_PYTHON", "") in ("", "0")
    else write_batch_in_python)
