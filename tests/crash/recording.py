"""The file-system operations a broker made, and the crash states they allow.

A recording comes from fsrecord.c (an LD_PRELOAD shim): every write (with its bytes),
truncation, name created, renamed or removed, and every fsync/fdatasync under the data
directory, numbered in the order the calls returned, with the time each returned.

The crash model is POSIX's, as ALICE and CrashMonkey take it:
- an fsync (or fdatasync) of a file makes durable every write and truncation of that
  file that had returned before the fsync began; nothing else (not the file's name);
- an fsync of a directory makes durable every entry change in it (a name created,
  removed, renamed to or from it) that had returned before the fsync began;
- anything else done before the crash may or may not be on disk after it, each
  operation independently, a write perhaps only in part (a torn write), in any order
  (a later write may be there while an earlier one is not).
A crash state keeps everything durable at its cut (the last operation before the crash)
plus a chosen subset of the rest, applied in the order they were made (a subset of the
operations on the same name or bytes, so any order of persisting them is covered:
applying a later one over an earlier one that did not persist is that order).

Files are followed by inode through renames; an inode reused after its file was deleted
is a new file to the model.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
SHIM = os.path.join(HERE, "..", "..", ".cache", "fsrecord", "fsrecord.so")

WRITE, TRUNCATE, CREATE, MKDIR, RENAME, UNLINK, RMDIR, FSYNC, FDATASYNC = range(1, 10)
OP_NAMES = {WRITE: "write", TRUNCATE: "truncate", CREATE: "create", MKDIR: "mkdir", RENAME: "rename",
            UNLINK: "unlink", RMDIR: "rmdir", FSYNC: "fsync", FDATASYNC: "fdatasync"}
_RECORD = struct.Struct("<IIQQQQQQQqqHHI")
_MAGIC = 0x46535243


def build_shim() -> str:
    """Build fsrecord.so (tests/crash/Makefile, gcc); its path. Fails with make's message
    if there is no compiler."""
    built = subprocess.run(["make", "-s", "-C", HERE], capture_output=True, text=True)
    if built.returncode != 0:
        raise RuntimeError(f"building the fsrecord shim failed:\n{built.stdout}{built.stderr}")
    return os.path.abspath(SHIM)


def shim_environment(root: str, log_path: str) -> dict[str, str]:
    """The environment that has a process record what it does under `root`."""
    return {"LD_PRELOAD": build_shim(), "FSRECORD_ROOT": os.path.realpath(root), "FSRECORD_LOG": log_path}


@dataclass(slots=True)
class Op:
    kind: int
    seq: int
    seq_start: int
    time_ns: int
    ino: int
    parent: int
    parent2: int
    replaced: int
    offset: int
    length: int
    is_dir: bool
    name: str
    name2: str
    data: bytes
    # Set by Recording: the model's file ids (an inode may be reused by a later file).
    file: int = 0
    dir: int = 0
    dir2: int = 0

    def __str__(self) -> str:
        what = OP_NAMES[self.kind]
        if self.kind == WRITE:
            return f"#{self.seq} {what} file {self.file} [{self.offset}, +{self.length})"
        if self.kind == TRUNCATE:
            return f"#{self.seq} {what} file {self.file} to {self.length}"
        if self.kind in (FSYNC, FDATASYNC):
            return f"#{self.seq} {what} {'dir' if self.is_dir else 'file'} {self.file} (began at #{self.seq_start})"
        if self.kind == RENAME:
            return f"#{self.seq} {what} {self.name!r} (dir {self.dir}) -> {self.name2!r} (dir {self.dir2})"
        return f"#{self.seq} {what} {self.name!r} in dir {self.dir} (file {self.file})"


def read_ops(path: str) -> list[Op]:
    with open(path, "rb") as f:
        data = f.read()
    ops = []
    at = 0
    while at + _RECORD.size <= len(data):
        (magic, kind, seq, seq_start, time_ns, ino, parent, parent2, replaced, offset, length, name_len, name2_len,
         is_dir) = _RECORD.unpack_from(data, at)
        assert magic == _MAGIC, f"fsrecord log damaged at byte {at}"
        at += _RECORD.size
        name = data[at:at + name_len].decode()
        at += name_len
        name2 = data[at:at + name2_len].decode()
        at += name2_len
        payload = b""
        if kind == WRITE:
            payload = data[at:at + length]
            at += length
        ops.append(Op(kind, seq, seq_start, time_ns, ino, parent, parent2, replaced, offset, length, bool(is_dir),
                      name, name2, payload))
    ops.sort(key=lambda op: op.seq)
    return ops


@dataclass
class Baseline:
    """The data directory before the recording began, all of it durable: its root's
    inode, and per inode (directory: {name: inode}; file: bytes)."""

    root: int
    dirs: dict[int, dict[str, int]] = field(default_factory=dict)
    files: dict[int, bytes] = field(default_factory=dict)

    @classmethod
    def take(cls, root: str) -> Baseline:
        baseline = cls(os.stat(root).st_ino)

        def walk(path: str, ino: int) -> None:
            entries = baseline.dirs.setdefault(ino, {})
            for entry in os.scandir(path):
                child = entry.inode()
                entries[entry.name] = child
                if entry.is_dir(follow_symlinks=False):
                    walk(entry.path, child)
                else:
                    with open(entry.path, "rb") as f:
                        baseline.files[child] = f.read()

        walk(root, baseline.root)
        return baseline


# A chooser decides, for each operation not durable at the cut, whether it persisted
# and, for a write, how many of its bytes did: None: not at all.
Chooser = Callable[[Op], int | None]


class Recording:
    def __init__(self, baseline: Baseline, ops: list[Op]) -> None:
        self.baseline = baseline
        self.ops = ops
        self._seqs = [op.seq for op in ops]
        self._times = [op.time_ns for op in ops]
        self._assign_files()
        self._durable_at = self._durability()

    def _assign_files(self) -> None:
        """Give every operation the model's ids of its file and directories: the inode's
        id, a new id whenever a name is created for an inode (its number may be reused)."""
        current: dict[int, int] = {}
        for ino in (self.baseline.root, *self.baseline.dirs, *self.baseline.files):
            current[ino] = ino
        self.kinds: dict[int, bool] = {ino: True for ino in self.baseline.dirs}  # id -> is a directory
        self.kinds.update({ino: False for ino in self.baseline.files})
        fresh = iter(range(1 << 62, 1 << 63))

        def id_of(ino: int) -> int:
            if ino not in current:
                current[ino] = next(fresh)
            return current[ino]

        for op in self.ops:
            if op.kind in (CREATE, MKDIR):
                current[op.ino] = next(fresh)
                self.kinds[current[op.ino]] = op.kind == MKDIR
            op.file = id_of(op.ino) if op.ino else 0
            op.dir = id_of(op.parent) if op.parent else 0
            op.dir2 = id_of(op.parent2) if op.parent2 else 0

    def _durability(self) -> list[int]:
        """For each operation, the seq of the first sync that makes it durable (the end
        of a sync of its file or directory that began after it returned); a huge number
        if none does."""
        never = 1 << 63
        syncs: dict[int, list[tuple[int, int]]] = {}  # target id -> [(seq_start, seq)]
        for op in self.ops:
            if op.kind in (FSYNC, FDATASYNC):
                syncs.setdefault(op.file, []).append((op.seq_start, op.seq))
        # Per target, sorted by start, the smallest end among the syncs from there on.
        starts: dict[int, list[int]] = {}
        least_end: dict[int, list[int]] = {}
        for target, spans in syncs.items():
            spans.sort()
            starts[target] = [s for s, _ in spans]
            ends = [e for _, e in spans]
            for i in range(len(ends) - 2, -1, -1):
                ends[i] = min(ends[i], ends[i + 1])
            least_end[target] = ends

        def first_sync(target: int, seq: int) -> int:
            if target not in starts:
                return never
            i = bisect_left(starts[target], seq + 1)
            return least_end[target][i] if i < len(starts[target]) else never

        durable = []
        for op in self.ops:
            if op.kind in (WRITE, TRUNCATE):
                durable.append(first_sync(op.file, op.seq))
            elif op.kind == RENAME:
                durable.append(max(first_sync(op.dir, op.seq), first_sync(op.dir2, op.seq)))
            elif op.kind in (CREATE, MKDIR, UNLINK, RMDIR):
                durable.append(first_sync(op.dir, op.seq))
            else:
                durable.append(0)  # a sync changes nothing itself
        return durable

    # --- cuts ----------------------------------------------------------------------------

    def cut_at_time(self, time_ns: int) -> int:
        """The index of the last operation that had returned by `time_ns` (-1: none)."""
        return bisect_left(self._times, time_ns + 1) - 1

    def time_of(self, cut: int) -> int:
        return self.ops[cut].time_ns if cut >= 0 else 0

    def undecided(self, cut: int) -> list[Op]:
        """The operations up to `cut` (an index) that a crash there may or may not keep."""
        end = self.ops[cut].seq if cut >= 0 else 0
        return [op for op, durable in zip(self.ops[:cut + 1], self._durable_at[:cut + 1], strict=True) if durable > end
                and op.kind not in (FSYNC, FDATASYNC)]

    def crash_state(self, cut: int, choose: Chooser, decisions: list[tuple[Op, int | None]] | None = None) -> State:
        """The files after a crash right after operation `cut` (an index): every
        operation durable by then, and of the others what `choose` keeps (each such
        choice appended to `decisions`, if given)."""
        state = State(self.baseline, self.kinds)
        end = self.ops[cut].seq if cut >= 0 else 0
        for op, durable in zip(self.ops[:cut + 1], self._durable_at[:cut + 1], strict=True):
            if op.kind in (FSYNC, FDATASYNC):
                continue
            if durable <= end:
                state.apply(op, op.length if op.kind == WRITE else 0)
                continue
            kept = choose(op)
            if decisions is not None:
                decisions.append((op, kept))
            if kept is not None:
                state.apply(op, kept)
        return state


class State:
    """Directories and file contents of one crash state, by the model's ids."""

    def __init__(self, baseline: Baseline, kinds: dict[int, bool]) -> None:
        self.root = baseline.root
        self.kinds = kinds
        self.dirs = {ino: dict(entries) for ino, entries in baseline.dirs.items()}
        self.files = {ino: bytearray(data) for ino, data in baseline.files.items()}

    def apply(self, op: Op, kept: int) -> None:
        if op.kind == WRITE:
            data = self.files.setdefault(op.file, bytearray())
            if len(data) < op.offset:
                data.extend(bytes(op.offset - len(data)))
            data[op.offset:op.offset + kept] = op.data[:kept]
        elif op.kind == TRUNCATE:
            data = self.files.setdefault(op.file, bytearray())
            del data[op.length:]
            data.extend(bytes(op.length - len(data)))
        elif op.kind in (CREATE, MKDIR):
            self.dirs.setdefault(op.dir, {})[op.name] = op.file
            if op.kind == MKDIR:
                self.dirs.setdefault(op.file, {})
            else:
                self.files.setdefault(op.file, bytearray())
        elif op.kind in (UNLINK, RMDIR):
            entries = self.dirs.setdefault(op.dir, {})
            if entries.get(op.name) == op.file:
                del entries[op.name]
        elif op.kind == RENAME:
            source = self.dirs.setdefault(op.dir, {})
            if source.get(op.name) == op.file:
                del source[op.name]
            self.dirs.setdefault(op.dir2, {})[op.name2] = op.file

    def materialize(self, path: str) -> None:
        """Write the state out as a directory tree at `path` (which must not exist)."""
        def write(directory: int, at: str, seen: frozenset[int]) -> None:
            os.makedirs(at)
            for name, child in self.dirs.get(directory, {}).items():
                if self.kinds.get(child, child in self.dirs):
                    if child not in seen:  # (a cycle would need a lost rename of a directory)
                        write(child, os.path.join(at, name), seen | {child})
                else:
                    with open(os.path.join(at, name), "wb") as f:
                        f.write(self.files.get(child, b""))

        write(self.root, path, frozenset({self.root}))

    def files_under(self) -> Iterator[tuple[str, int]]:
        """(relative path, size) of every file reachable, for reports."""
        for path, data in self.contents():
            yield path, len(data)

    def contents(self) -> Iterator[tuple[str, bytes]]:
        """(relative path, bytes) of every file reachable."""
        def walk(directory: int, prefix: str) -> Iterator[tuple[str, bytes]]:
            for name, child in sorted(self.dirs.get(directory, {}).items()):
                if self.kinds.get(child, child in self.dirs):
                    yield from walk(child, prefix + name + "/")
                else:
                    yield prefix + name, bytes(self.files.get(child, b""))

        return walk(self.root, "")


# --- choosers -------------------------------------------------------------------------------


def keep_nothing(op: Op) -> int | None:
    """Only what was made durable: the harshest crash (the disk kept nothing else)."""
    return None


def keep_everything(op: Op) -> int | None:
    """Everything done: what a kill -9 leaves (the page cache survives)."""
    return op.length if op.kind == WRITE else 0


def keep_at_random(rng: random.Random, torn: float = 0.2) -> Chooser:
    """Each operation independently with probability one half; a kept write is torn
    (only a prefix of its bytes, at a 512-byte sector or anywhere) with probability
    `torn`."""
    def choose(op: Op) -> int | None:
        if rng.random() < 0.5:
            return None
        if op.kind != WRITE:
            return 0
        if op.length > 1 and rng.random() < torn:
            sectors = (op.length - 1) // 512
            return rng.randint(1, sectors) * 512 if sectors and rng.random() < 0.5 else rng.randrange(1, op.length)
        return op.length
    return choose


def keep_names_not_data(op: Op) -> int | None:
    """Every entry change but no unsynced byte: names (a new segment, a renamed
    checkpoint) there, their contents not (as after a metadata-journaling file system
    without ordered data)."""
    return None if op.kind in (WRITE, TRUNCATE) else 0


def keep_data_not_names(op: Op) -> int | None:
    """Every write but no unsynced entry change: the bytes reached the disk, the names
    did not (what a directory never fsynced loses)."""
    if op.kind == WRITE:
        return op.length
    return 0 if op.kind == TRUNCATE else None


def remove_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
