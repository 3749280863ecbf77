"""The `ottla` command line.

    ottla serve [--config server.properties] [--host H] [--port P] [--advertised-host A]
                [--data-dir D] [--log-level L] [--log-format console|json] [--admin-port P]
                [--<kafka.property> VALUE ...] [--override key=value ...]
    ottla dump-log [--transaction-log-decoder | --offsets-decoder] FILE...
    ottla topics create|list|describe|delete, ottla groups list|describe,
    ottla transactions list|describe, ottla produce, ottla consume   (see admin_cli, console)
    ottla console [--admin-url URL] [--no-browser]   the web console (see console/)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from ottla.broker.config import LOG_DEFAULTS, PROPERTIES, ConfigError, ResolvedConfig, resolve_config
from ottla.broker.logging import configure, get_logger
from ottla.broker.network.request_memory import settle_allocator
from ottla.broker.security.scram_credentials import ScramCredential, parse_add_scram

from . import ready_lines

# What only some starts use (--dev-security, TLS, signed OAUTHBEARER tokens) and the
# other subcommands' tools are imported where they are used: `ottla serve` with none of
# them configured is ready sooner (tests/integration/test_start_imports.py).
if TYPE_CHECKING:
    from ottla.broker.security.dev_security import DevSecurity

# The subcommands `main` handles itself; any other (or none: --help) builds the tools'
# parsers too.
_OWN_COMMANDS = ("serve", "dump-log")


def _serve_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the broker",
                       description="Settings come from --config (a Kafka server.properties), OTTLA_<KEY> "
                                   "environment variables (OTTLA_NUM_PARTITIONS...) and flags, each "
                                   "overriding the one before.")
    p.add_argument("--config", metavar="FILE", help="a server.properties file with Kafka's property names")
    # Shortcuts for the settings everyone changes; each is a property set on the command line.
    p.add_argument("--host", help="address the first listener binds (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port of the first listener, 0 for any free port (default 9092)")
    p.add_argument("--advertised-host", help="host clients are told to connect to, for the first listener")
    p.add_argument("--data-dir", dest="kafka:log.dirs", metavar="DIR", help="where partitions are stored (log.dirs)")
    p.add_argument("--log-level", dest="kafka:log.level", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-format", dest="kafka:log.format", choices=["console", "json"])
    p.add_argument("--fsync", dest="kafka:fsync.on.ack", action="store_const", const="true",
                   help="fsync before acknowledging, with group commit (fsync.on.ack)")
    p.add_argument("--admin-port", dest="kafka:admin.port", metavar="PORT",
                   help="serve /healthz, /metrics and /faults over HTTP on this port (admin.port)")
    documented = [(prop.kafka_name, prop.doc) for prop in PROPERTIES]
    documented += [("listeners", "NAME://HOST:PORT,... to listen on (default PLAINTEXT://127.0.0.1:9092)"),
                   ("advertised.listeners", "NAME://HOST:PORT,... clients are told to connect to"),
                   ("listener.security.protocol.map", "NAME:PLAINTEXT,... for listeners not named PLAINTEXT")]
    documented += [(name, f"default {c.name} of topics: {c.doc}") for name, c in LOG_DEFAULTS.items()]
    for kafka_name, doc in documented:
        p.add_argument(f"--{kafka_name}", dest=f"kafka:{kafka_name}", metavar="VALUE", help=doc)
    p.add_argument("--dev-security", action="store_true",
                   help="a throwaway CA and certificate, a SCRAM user, and the first listener on SASL_SSL: "
                        "prints the client properties (development and CI only)")
    p.add_argument("--add-scram", action="append", default=[], metavar="CREDENTIAL",
                   help="add a SCRAM user at start, as kafka-storage format does: "
                        "'SCRAM-SHA-512=[name=alice,password=alice-secret]' (repeatable)")
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


def build_config(args: argparse.Namespace) -> ResolvedConfig:
    """Defaults < development defaults < --config file < OTTLA_* variables < flags (see
    config.resolve_config)."""
    flags = {}
    for key, value in vars(args).items():
        if key.startswith("kafka:") and value is not None:
            flags[key[len("kafka:"):]] = value
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--override expects key=value, got {item!r}")
        flags[key.strip()] = value.strip()
    resolved = resolve_config(args.config, os.environ, flags)
    config = resolved.config.with_first_listener(args.host, args.port, args.advertised_host)
    return ResolvedConfig(config, resolved.unknown, resolved.sources)


async def _serve(resolved: ResolvedConfig, add_scram: list[tuple[str, str, ScramCredential]],
                 dev: DevSecurity | None) -> None:
    from .serve import ServedBroker

    served = ServedBroker(resolved.config, add_scram + (dev.scram if dev is not None else []),
                          config_sources=resolved.sources)
    broker = served.broker
    await broker.start()
    if served.admin_url is not None:
        print(ready_lines.admin_line(served.admin_url), flush=True)
    if served.schema_registry_url is not None:
        print(ready_lines.schema_registry_line(served.schema_registry_url), flush=True)
    for listener in broker.listeners[1:]:
        host, port = listener.advertised_address
        print(ready_lines.listener_line(listener.name, listener.security_protocol, host, port), flush=True)
    if dev is not None:
        librdkafka_path, java_path = dev.write_client_files(broker.bootstrap)
        print(f"Ottla dev security: SASL_SSL with SCRAM. librdkafka clients ({librdkafka_path}):", flush=True)
        for key, value in dev.librdkafka_config(broker.bootstrap).items():
            print(f"  {key}={value}", flush=True)
        print(f"Java clients and Kafka's tools ({java_path}):", flush=True)
        for key, value in dev.java_properties(broker.bootstrap).items():
            print(f"  {key}={value}", flush=True)
    print(ready_lines.ready_line(broker.bootstrap), flush=True)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(broker.stop()))
    if await broker.coordinators_loaded():
        # Transactions and groups are served from here on (before, their requests are
        # answered COORDINATOR_LOAD_IN_PROGRESS and clients retry).
        print(ready_lines.LOADED_LINE, flush=True)
    await broker.wait_stopped()


def _with_dev_security(resolved: ResolvedConfig) -> tuple[ResolvedConfig, DevSecurity]:
    """The first listener renamed SASL_SSL and secured with dev_security's material."""
    from ottla.broker.security.dev_security import prepare

    config = resolved.config
    first = config.listeners[0]
    if any(listener.name == "SASL_SSL" for listener in config.listeners[1:]):
        raise ValueError("--dev-security makes the first listener SASL_SSL; another listener has that name")
    dev = prepare(config.data_dir, "SASL_SSL", [first.advertised_address[0]])
    first = replace(first, name="SASL_SSL", security_protocol="SASL_SSL")
    config = replace(config, listeners=(first, *config.listeners[1:]), security={**config.security, **dev.properties})
    config.listener_security(first)
    return ResolvedConfig(config, resolved.unknown, resolved.sources), dev


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ottla", description="A Kafka-wire broker with exactly-once at its heart.")
    sub = parser.add_subparsers(dest="command", required=True)
    _serve_parser(sub)
    _dump_log_parser(sub)
    if argv is None:
        argv = sys.argv[1:]
    if not argv or argv[0] not in _OWN_COMMANDS:
        from . import admin_cli, console, open_console

        admin_cli.add_parsers(sub)
        console.add_parsers(sub)
        open_console.add_parser(sub)
    args = parser.parse_args(argv)
    if hasattr(args, "run"):  # the wire-protocol tools
        return args.run(args)
    if args.command == "serve":
        dev = None
        try:
            resolved = build_config(args)
            add_scram = [parse_add_scram(text) for text in args.add_scram]
            if args.dev_security:
                resolved, dev = _with_dev_security(resolved)
            for listener in resolved.config.listeners:  # the TLS files: readable, usable
                security = resolved.config.listener_security(listener)
                if security.ssl is not None:
                    from ottla.broker.security.tls import server_context

                    server_context(security.ssl)
                if security.sasl is not None and security.sasl.oauthbearer is not None:
                    from ottla.broker.security.oauthbearer import validator_for

                    try:  # the JWKS: readable, holding keys
                        validator_for(security.sasl.oauthbearer)
                    except OSError as exc:
                        raise ValueError(f"cannot read the JWKS {security.sasl.oauthbearer.jwks_url}: "
                                         f"{exc.strerror or exc}") from None
        except ValueError as exc:
            parser.error(str(exc))
        config = resolved.config
        configure(config.log_level, config.log_format)
        for key, source in resolved.unknown.items():
            get_logger("ottla.config").warning("unknown setting ignored", key=key, source=source)
        for listener in config.listeners:
            sasl = config.listener_security(listener).sasl
            if sasl is not None and "OAUTHBEARER" in sasl.mechanisms and sasl.oauthbearer is None:
                get_logger("ottla.config").warning(
                    "OAUTHBEARER accepts unsecured tokens: anyone may claim any principal; for development only "
                    "(set sasl.oauthbearer.jwks.endpoint.url to validate signed tokens)", listener=listener.name)
        settle_allocator()
        try:
            try:
                import uvloop
            except ImportError:  # pragma: no cover - uvloop is a dependency; this is a fallback
                asyncio.run(_serve(resolved, add_scram, dev))
            else:
                uvloop.run(_serve(resolved, add_scram, dev))
        except ConfigError as exc:  # what the data directory holds stops the start (a `_schemas` not compacted)
            get_logger("ottla.config").error("not started", key=exc.key, reason=str(exc))
            parser.exit(1, f"ottla serve: {exc}\n")
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
