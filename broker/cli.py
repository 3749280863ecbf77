"""The `ottla` command line.

    ottla serve [--host H] [--port P] [--advertised-host A] [--data-dir D]
                [--log-level L] [--log-format console|json]
                [--<kafka.property> VALUE ...] [--override key=value ...]
    ottla dump-log [--transaction-log-decoder | --offsets-decoder] FILE...
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from .config import LOG_DEFAULTS, PROPERTIES, BrokerConfig
from .logging import configure


def _serve_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the broker")
    defaults = BrokerConfig()
    p.add_argument("--host", default=defaults.host, help="address to listen on (default %(default)s)")
    p.add_argument("--port", type=int, default=defaults.port, help="port to listen on, 0 for any free port")
    p.add_argument("--advertised-host", default=None, help="host clients are told to connect to")
    p.add_argument("--data-dir", default=defaults.data_dir, help="where partitions are stored")
    p.add_argument("--log-level", default=defaults.log_level, choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-format", default=defaults.log_format, choices=["console", "json"])
    documented = [(prop.kafka_name, prop.doc) for prop in PROPERTIES]
    documented += [(name, f"default {c.name} of topics: {c.doc}") for name, c in LOG_DEFAULTS.items()]
    for kafka_name, doc in documented:
        p.add_argument(f"--{kafka_name}", dest=f"kafka:{kafka_name}", metavar="VALUE", help=doc)
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="set any broker property by its Kafka name")


def _dump_log_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dump-log", help="print partition files as kafka-dump-log --print-data-log does")
    p.add_argument("files", nargs="+", metavar="FILE", help="a .log, .index, .timeindex, .txnindex or .snapshot file")
    decoders = p.add_mutually_exclusive_group()
    decoders.add_argument("--transaction-log-decoder", dest="decoder", action="store_const", const="transaction-log",
                          help="decode records as __transaction_state's (automatic in its directories)")
    decoders.add_argument("--offsets-decoder", dest="decoder", action="store_const", const="offsets",
                          help="decode records as __consumer_offsets' (automatic in its directories)")


def build_config(args: argparse.Namespace) -> BrokerConfig:
    config = BrokerConfig(
        host=args.host,
        port=args.port,
        advertised_host=args.advertised_host,
        data_dir=args.data_dir,
        log_level=args.log_level,
        log_format=args.log_format,
    )
    properties = {}
    for key, value in vars(args).items():
        if key.startswith("kafka:") and value is not None:
            properties[key[len("kafka:"):]] = value
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--override expects key=value, got {item!r}")
        properties[key.strip()] = value.strip()
    return config.with_kafka_properties(properties)


async def _serve(config: BrokerConfig) -> None:
    from .server import Broker

    broker = Broker(config)
    await broker.start()
    print(f"Ottla is ready: bootstrap.servers={broker.bootstrap}", flush=True)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(broker.stop()))
    await broker.wait_stopped()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ottla", description="A Kafka-wire broker with exactly-once at its heart.")
    sub = parser.add_subparsers(dest="command", required=True)
    _serve_parser(sub)
    _dump_log_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "serve":
        try:
            config = build_config(args)
        except ValueError as exc:
            parser.error(str(exc))
        configure(config.log_level, config.log_format)
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a dependency; this is a fallback
            asyncio.run(_serve(config))
        else:
            uvloop.run(_serve(config))
        return 0
    if args.command == "dump-log":
        from .dump_log import dump_files

        try:
            dump_files(args.files, sys.stdout, decoder=args.decoder)
        except (OSError, ValueError) as exc:
            parser.exit(1, f"ottla dump-log: {exc}\n")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
