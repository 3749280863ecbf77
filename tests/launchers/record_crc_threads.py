"""Run the broker and write, for every CRC-32C it computes over more than 1 MiB, the
name of the thread that computed it, one a line, to the file named by
OTTLA_TEST_CRC_THREADS_FILE: where a large produced batch's CRC is checked, seen from
within the broker process (tests/integration/test_record_validation.py). Started by
`BrokerProcess(launcher=...)` with the arguments of `ottla serve`."""

from __future__ import annotations

import os
import sys
import threading

from ottla.broker.handlers import produce
from ottla.protocol import batch
from ottla.tools import cli

THREADS_FILE = os.environ["OTTLA_TEST_CRC_THREADS_FILE"]
_compute_crc = batch.compute_crc


def _compute_crc_recording_thread(buffer):  # type: ignore[no-untyped-def]
    if len(buffer) > 1024 * 1024:
        with open(THREADS_FILE, "a", encoding="utf-8") as f:
            f.write(threading.current_thread().name + "\n")
    return _compute_crc(buffer)


# Both names the CRC is computed by: batch's own (validate_produced_batch), and the one
# the Produce handler imported.
batch.compute_crc = produce.compute_crc = _compute_crc_recording_thread  # type: ignore[attr-defined]

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:]))
