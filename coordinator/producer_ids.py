"""Producer ids, handed out from blocks persisted in the data directory.

The end of the current block is written (and fsynced) before any id in it is handed
out, so after a restart, clean or not, allocation resumes past every id ever issued:
an id is never given to two producers.
"""

from __future__ import annotations

import os

from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.directories import replace_durably

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block"


class ProducerIdAllocator:
    def __init__(self, data_dir: str, block_size: int = BLOCK_SIZE) -> None:
        self.path = os.path.join(data_dir, FILE_NAME)
        self.block_size = block_size
        self._next = self._read_block_end()
        self._block_end = self._next

    def _read_block_end(self) -> int:
        try:
            with open(self.path) as f:
                return int(f.read().strip() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def _reserve_block(self) -> None:
        """Persist the end of the next block, then take it. A block that cannot be
        written is not taken: the request is answered as Kafka answers a producer id
        asked for while no block is available (COORDINATOR_LOAD_IN_PROGRESS, which
        clients retry)."""
        end = self._next + self.block_size
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "w") as f:
                f.write(f"{end}\n")
                f.flush()
                os.fsync(f.fileno())
            # The directory too: were the rename lost to a power loss, the old block's
            # end would come back and its ids be handed out again.
            replace_durably(tmp, self.path)
        except OSError as exc:
            raise KafkaError(ErrorCode.coordinator_load_in_progress,
                             f"no producer id block: it could not be written ({exc})") from exc
        self._block_end = end

    def allocate(self) -> int:
        if self._next >= self._block_end:
            self._reserve_block()
        producer_id = self._next
        self._next += 1
        return producer_id
