"""A range of a segment's `.log` for a Fetch answer, sent from the file instead of read
into memory.

A Fetch answer may hold up to the client's fetch.max.bytes of records (librdkafka asks
for 50 MiB): read into bytes, that much sat in the broker's memory until the client took
it. Kafka sends the range with sendfile, from the page cache. A FileSlice is what the
answer holds instead: a descriptor of its own on the segment's file, where the range
starts and how long it is. The connection sends it with os.sendfile on a plaintext
listener, or reads it (`read`) to hand it to TLS, which encrypts bytes in memory.

The descriptor is the slice's own (a dup of the segment's): retention may delete the
segment, compaction replace it, or the open-files budget close the segment's descriptor
while the answer is still on its way, and the range stays readable, as Kafka's open
FileRecords keep theirs. Only truncation changes the bytes under it, and a truncated
range is found short (`read` raises ShortSlice; the sender too) rather than sent as
something else.
"""

from __future__ import annotations

import errno
import os
import resource

from ottla.protocol import compiled_codec


class ShortSlice(OSError):
    """The file ended before the slice did: it was truncated after the slice was taken."""


def slice_limit() -> int:
    """Slices that may hold a descriptor at once: a quarter of what the open-files budget
    (storage/open_files.py) leaves for connections and everything else. A client that
    asks for many large ranges (one partition listed hundreds of times) and then stops
    reading keeps its slices until the connection goes: past this, ranges are read into
    memory as before (LogSegment.read), and accepting connections, rolling segments and
    flushing still find descriptors."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(64, max(1024, soft // 4) // 4)


class FileSlice:
    __slots__ = ("fd", "position", "size")
    live = 0  # slices holding a descriptor, in the whole process
    # slice_limit() as of the last look at the process's descriptor limit (LogManager.load,
    # after the broker raised it): not asked of the kernel at every slice of every Fetch.
    limit = slice_limit()

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = -1  # for __del__, should dup fail
        if FileSlice.live >= FileSlice.limit:
            raise OSError(errno.EMFILE, "the descriptors for answers sent from files are all in use")
        self.fd = os.dup(fd)
        FileSlice.live += 1
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileSlice(fd={self.fd}, position={self.position}, size={self.size})"

    def read(self) -> bytes:
        """The range's bytes (for TLS, and for anything that needs them in memory)."""
        data = os.pread(self.fd, self.size, self.position)
        if len(data) != self.size:
            raise ShortSlice(f"{len(data)} of {self.size} bytes left at position {self.position}")
        return data

    __bytes__ = read

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            FileSlice.live -= 1

    def __del__(self) -> None:
        # An answer dropped unsent (a throttled fetch, a long poll that looks again, a
        # connection gone) lets go of its descriptors with it.
        self.close()


# The compiled response encoder passes a FileSlice on as a chunk of its own, and refuses
# any other value that is not a buffer (protocol/_codec.c; protocol imports nothing of
# storage, so it is told the class here).
if compiled_codec.compiled is not None:
    compiled_codec.compiled.accept_file_chunks(FileSlice)
