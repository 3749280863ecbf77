"""Run the broker and, as it exits, write the name of every module it imported, one a
line, to the file named by OTTLA_TEST_MODULES_FILE: what `ottla serve` loads, seen from
within the broker process (tests/integration/test_start_imports.py). Started by
`BrokerProcess(launcher=...)` with the arguments of `ottla serve`."""

from __future__ import annotations

import atexit
import os
import sys

from ottla.tools import cli


def _write_modules() -> None:
    with open(os.environ["OTTLA_TEST_MODULES_FILE"], "w", encoding="utf-8") as f:
        f.write("\n".join(sorted(sys.modules)) + "\n")


if __name__ == "__main__":
    atexit.register(_write_modules)
    sys.exit(cli.main(sys.argv[1:]))
