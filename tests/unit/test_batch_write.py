"""storage/_batch_write.c's write_batch against its Python twin, write_batch_in_python:
the same answers (bytes written, or the same exception) and the same file bytes, for
batches, offsets and epochs of every kind the append path and a bad caller can give."""

from __future__ import annotations

import os
import random
import struct
from typing import Any

import pytest

from ottla.protocol.batch import BatchHeader, build_batch, crc_is_valid, encode_record
from ottla.storage import batch_write
from ottla.storage.batch_write import write_batch_in_python

from .extensions import compiled_extension

C = compiled_extension("_batch_write", "ottla.storage")


def _outcome(write: Any, path: str, *args: Any) -> tuple[Any, bytes]:
    """(what `write` answered, or its exception's type, and the file's bytes after it)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC)
    try:
        try:
            answer: Any = write(fd, *args)
        except (struct.error, OSError, TypeError) as exc:
            answer = type(exc)
    finally:
        os.close(fd)
    with open(path, "rb") as f:
        return answer, f.read()


def _batch(records: int, value_size: int) -> bytes:
    return build_batch([encode_record(b"k", b"v" * value_size, offset_delta=i) for i in range(records)],
                       timestamp=1_795_797_555_933, producer_id=7, producer_epoch=1, base_sequence=0)


def test_the_append_path_writes_with_the_c_write() -> None:
    """Unless OTTLA_PURE_PYTHON=1 asks for the Python path (tests/integration/test_request_paths.py
    compares a broker on each)."""
    pure = os.environ.get("OTTLA_PURE_PYTHON", "") not in ("", "0")
    assert batch_write.write_batch is (write_batch_in_python if pure else C.write_batch)


def test_a_batch_is_written_with_its_offset_and_epoch_and_stays_valid(tmp_path) -> None:
    path = str(tmp_path / "log")
    batch = _batch(3, 100)
    written, data = _outcome(C.write_batch, path, batch, 1234, 5)
    assert written == len(batch) == len(data)
    header = BatchHeader.parse(data)
    assert (header.base_offset, header.partition_leader_epoch, header.size) == (1234, 5, len(batch))
    assert data[16:] == batch[16:] and crc_is_valid(data, header)


def test_write_batch_answers_as_its_python_twin(tmp_path) -> None:
    path = str(tmp_path / "log")
    rng = random.Random(45)
    batches: list[Any] = [_batch(1, 100), _batch(5, 0), _batch(50, 1000), b"", b"x", b"y" * 15, b"z" * 16,
                          b"w" * 17, bytearray(_batch(2, 10)), memoryview(_batch(3, 30))[:40]]
    batches += [bytes(rng.randrange(256) for _ in range(rng.randrange(64))) for _ in range(50)]
    offsets = [0, 1, 2**31, 2**63 - 1, -1, -(2**63), 2**63, -(2**63) - 1, True, 1.5, "1", None]
    epochs = [0, 7, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 1.0, None]
    for batch in batches:
        for offset in offsets:
            for epoch in epochs:
                args = (batch, offset, epoch)
                assert _outcome(C.write_batch, path, *args) == _outcome(write_batch_in_python, path, *args), args
    for bad_batch in (None, 5, "text"):
        assert _outcome(C.write_batch, path, bad_batch, 0, 0) == _outcome(write_batch_in_python, path, bad_batch, 0, 0)


def test_a_failed_write_raises_oserror_as_the_twin(tmp_path) -> None:
    batch = _batch(1, 10)
    read_only = tmp_path / "read-only"
    read_only.write_bytes(b"")
    for write in (C.write_batch, write_batch_in_python):
        fd = os.open(str(read_only), os.O_RDONLY)
        try:
            with pytest.raises(OSError) as raised:
                write(fd, batch, 0, 0)
        finally:
            os.close(fd)
        assert raised.value.errno == 9  # EBADF: not open for writing
        with pytest.raises(OSError):
            write(fd, batch, 0, 0)  # closed
        with pytest.raises((OSError, ValueError)):
            write(-1, batch, 0, 0)
