"""The web console: pages served by the broker on its admin endpoint (`/console`) that show
what exactly-once looks like in this broker: open transactions and the LSO they hold
back, aborted records, producer ids and their sequences, groups and their lag.

Not to be confused with broker/console.py, the `ottla produce` / `ottla consume`
command-line producer and consumer."""

from .app import WebConsole

__all__ = ["WebConsole"]
