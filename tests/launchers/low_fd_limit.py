"""Run the broker as a process allowed only 300 open files (soft and hard), as on a
machine whose limit a data directory has outgrown: for the start-up test in
tests/integration/test_open_files.py. Started by `BrokerProcess(launcher=...)` with the
arguments of `ottla serve`."""

from __future__ import annotations

import resource
import sys

from ottla.tools import cli

LIMIT = 300

if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))
    sys.exit(cli.main(sys.argv[1:]))
