"""structlog set-up: readable console lines for people, JSON lines for machines; and the
level of each logger, changeable at run time (Kafka's BROKER_LOGGER configs:
`kafka-configs --entity-type broker-loggers --alter --add-config ottla.produce=DEBUG`)."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

ROOT = "root"
# Kafka's (log4j's) level names, and what each means here.
LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}
_NAMES = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARN", logging.ERROR: "ERROR",
          logging.CRITICAL: "FATAL", logging.CRITICAL + 10: "OFF"}
_METHOD_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "warn": logging.WARNING,
                  "error": logging.ERROR, "exception": logging.ERROR, "critical": logging.CRITICAL,
                  "fatal": logging.CRITICAL}
_levels: dict[str, int] = {ROOT: logging.INFO}  # set levels, by logger name
_known: set[str] = set()  # every logger name handed out


def configure(level: str = "info", fmt: str = "console") -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    _levels.clear()
    _levels[ROOT] = numeric
    renderer = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            _by_logger_level,
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        # Every level reaches _by_logger_level, which applies each logger's own.
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    _known.add(name)
    return structlog.get_logger(logger_name=name)


def effective_level(name: str) -> int:
    """The level set for `name` or its nearest dotted ancestor, else the root's."""
    while True:
        if name in _levels:
            return _levels[name]
        if "." not in name:
            return _levels[ROOT]
        name = name.rsplit(".", 1)[0]


def _by_logger_level(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    name = event.pop("logger_name", ROOT)
    if _METHOD_LEVELS.get(method, logging.INFO) < effective_level(name):
        raise structlog.DropEvent
    return event


def logger_levels() -> dict[str, str]:
    """Every logger and its effective level, in Kafka's names."""
    return {name: _NAMES.get(effective_level(name), "INFO") for name in sorted({ROOT, *_known, *_levels})}


def set_logger_level(name: str, level: str | None) -> None:
    """Set a logger's level (Kafka's names); None goes back to the root's (the root's
    own cannot be removed). Raises ValueError."""
    if name != ROOT and name not in _known and name not in _levels:
        raise ValueError(f"Logger {name} does not exist")
    if level is None:
        if name == ROOT:
            raise ValueError("Removing the log level of the root logger is not allowed")
        _levels.pop(name, None)
        return
    numeric = LEVELS.get(level.upper())
    if numeric is None:
        raise ValueError(f"Cannot set the log level of {name} to {level} as it is not a supported log level. "
                         f"Valid log levels are {', '.join(LEVELS)}")
    _levels[name] = numeric
