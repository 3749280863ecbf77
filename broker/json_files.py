"""The broker's small files in the data directory (ACLs, SCRAM credentials, client
quotas, dynamic broker configs): JSON, read whole at start and replaced whole on each
change, durably (a temporary file, fsync, rename, fsync of the directory), so a crash
leaves the old file or the new one, never a torn one."""

from __future__ import annotations

import json
import os
from typing import Any


def read_json(path: str, default: Any) -> Any:
    """The file's content, or `default` if there is no file yet."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return default


def write_json(path: str, data: Any, mode: int = 0o644) -> None:
    """Replace the file with `data`; `mode` 0o600 for secrets."""
    temporary = path + ".tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    if not mode & 0o077:
        # A secret's file is the owner's alone, even over a temporary file a crash left.
        os.fchmod(fd, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    directory = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
