"""The commands beside the broker: the `ottla` command (cli.py) with `ottla serve` (serve.py:
the broker and the servers configured beside it), admin, produce/consume, dump-log, and the
small wire client they share."""
