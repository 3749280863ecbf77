"""The crash model of tests/crash/recording.py, on a small script recorded by the shim:
what an fsync of a file makes durable, what only an fsync of its directory does."""

from __future__ import annotations

import os
import subprocess
import sys

from .recording import (
    Baseline,
    Recording,
    keep_data_not_names,
    keep_everything,
    keep_nothing,
    read_ops,
    shim_environment,
)

SCRIPT = """
import os, sys, time
root = sys.argv[1]

def sync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)

os.mkdir(root + "/d")
fd = os.open(root + "/d/a", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
os.write(fd, b"first")
os.fsync(fd)                       # the bytes of d/a, not its name, nor d's
print("A", time.monotonic_ns(), flush=True)
sync_dir(root)
sync_dir(root + "/d")              # now d and d/a are there for good
print("B", time.monotonic_ns(), flush=True)
with open(root + "/d/c.tmp", "wb") as f:
    f.write(b"new")
    f.flush()
    os.fsync(f.fileno())
os.replace(root + "/d/c.tmp", root + "/d/c")
os.write(fd, b"-second")           # never synced
print("C", time.monotonic_ns(), flush=True)
sync_dir(root + "/d")
print("D", time.monotonic_ns(), flush=True)
"""


def test_a_name_is_durable_only_once_its_directory_is_synced(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    log = str(tmp_path / "fs.log")
    baseline = Baseline.take(str(root))
    moments = {}
    process = subprocess.Popen([sys.executable, "-c", SCRIPT, str(root)], stdout=subprocess.PIPE, text=True,
                               env=dict(os.environ, **shim_environment(str(root), log)))
    assert process.stdout is not None
    # Each moment as the script itself saw it (CLOCK_MONOTONIC, the shim's clock): read
    # here, it could be after the script's next operations.
    for line in process.stdout:
        name, at = line.split()
        moments[name] = int(at)
    assert process.wait() == 0
    recording = Recording(baseline, read_ops(log))

    def files(moment: str, chooser) -> dict[str, int]:
        return dict(recording.crash_state(recording.cut_at_time(moments[moment]), chooser).files_under())

    # After the file's fsync alone, a crash may lose its name (and the directory's).
    assert files("A", keep_nothing) == {}
    assert files("A", keep_data_not_names) == {}
    assert files("A", keep_everything) == {"d/a": 5}
    # Both directories synced: d/a is there whatever else is lost.
    assert files("B", keep_nothing) == {"d/a": 5}
    # The rename of a fsynced file without the directory's fsync: the old names may be
    # all there is; the unsynced append may be lost, or kept.
    assert files("C", keep_nothing) == {"d/a": 5}
    assert files("C", keep_everything) == {"d/a": 12, "d/c": 3}
    assert files("D", keep_nothing) == {"d/a": 5, "d/c": 3}
