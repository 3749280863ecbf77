"""Which segments keep their files open: the most recently used ones, within a budget of
file descriptors.

Kafka keeps every segment's files open, and so did Ottla: a data directory with more
segments than the process may have descriptors (a CreateTopics of thousands of
partitions did it) made every start-up fail with EMFILE. Now a segment's files (its
`.log`, and its indexes with it) are opened when it is used and counted here; when more
segments are open than the budget allows, the least recently used ones close theirs,
to be reopened on their next use. The active segment of a partition being written is
the most recently used, so appends never pay for a reopen.

Only the event loop's thread uses segments through here (compaction reads source
segments by path, and builds its cleaned copies outside the budget), so nothing can
close a descriptor another thread is using.
"""

from __future__ import annotations

import resource
from collections import OrderedDict
from typing import Protocol

# Descriptors a segment may hold: .log, .index, .timeindex and, once it has an aborted
# transaction, .txnindex.
DESCRIPTORS_PER_SEGMENT = 4


class HoldsFiles(Protocol):
    def release_files(self) -> None: ...


class OpenFiles:
    def __init__(self, budget: int) -> None:
        self.budget = budget  # segments
        self._open: OrderedDict[HoldsFiles, None] = OrderedDict()
        # `touch` of a segment already open, as a C call: it raises KeyError for any
        # other (an append pays this, not `touch`'s Python call; segment.py).
        self.touch_open = self._open.move_to_end

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, segment: object) -> bool:
        return segment in self._open

    def touch(self, segment: HoldsFiles) -> None:
        """`segment` is being used: it is now the most recently used, and if that makes
        one too many, the least recently used one closes its files."""
        if segment in self._open:
            self._open.move_to_end(segment)
            return
        self._open[segment] = None
        while len(self._open) > self.budget:
            victim, _ = self._open.popitem(last=False)
            victim.release_files()

    def forget(self, segment: HoldsFiles) -> None:
        self._open.pop(segment, None)


def budget_from_limit() -> int:
    """Segments that may keep their files open: the process's descriptor limit, less a
    quarter (at least 1,024) for client connections and everything else."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(16, (soft - max(1024, soft // 4)) // DESCRIPTORS_PER_SEGMENT)


# One budget for the process: descriptors are the process's.
OPEN_FILES = OpenFiles(budget_from_limit())
