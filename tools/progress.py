"""A one-line progress report for the long-running commands (`ottla produce` of a large
file, `ottla consume` of a big topic, `ottla dump-log` of a large segment).

It is for a person watching a terminal, so it is drawn only when stderr is one; piped or
redirected, a command prints exactly what it printed before. A command whose data goes
to stdout (consume, dump-log) draws it only when stdout is not that same terminal
either: records scrolling by are their own progress, and a status line redrawn among
them would garble them. The line is redrawn at most four times a second and erased at
the end.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from typing import TextIO

_INTERVAL = 0.25


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    def __init__(self, what: str, total: int | None = None, unit: str = "records", *,
                 data_on_stdout: bool = False, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_terminal(self.stream) and not (data_on_stdout and _is_terminal(sys.stdout))
        self.what = what
        self.total = total
        self.unit = unit
        self._started = self._drawn = time.monotonic()
        self._shown = False

    def update(self, done: int, note: str = "") -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._drawn < _INTERVAL:
            return
        self._drawn = now
        rate = done / max(now - self._started, 1e-6)
        amount = f"{_amount(done, self.unit)}"
        if self.total:
            amount += f" of {_amount(self.total, self.unit)} ({min(100, 100 * done // self.total)}%)"
        text = f"{self.what}: {amount}, {_amount(int(rate), self.unit)}/s"
        if note:
            text += f", {note}"
        self.stream.write(f"\r{text}\x1b[K")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        """Erase the line, so the command's last words stand alone."""
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False


def _amount(n: int, unit: str) -> str:
    if unit == "bytes":
        return f"{n / (1024 * 1024):,.1f} MiB"
    return f"{n:,} {unit}"


def regular_file_size(stream: object) -> int | None:
    """The size of the file behind `stream` if it is a regular file (a redirect, not a
    pipe), else None."""
    try:
        status = os.fstat(stream.fileno())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None
