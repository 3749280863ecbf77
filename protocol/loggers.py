"""Ottla's named loggers and the level of each, changeable at run time (Kafka's
BROKER_LOGGER configs: `kafka-configs --entity-type broker-loggers --alter --add-config
ottla.produce=DEBUG`). Every layer takes its logger from `get_logger`, here at the bottom
of the layers, so that each is listed, has its own level, and goes through the set-up
of broker/logging.py."""

from __future__ import annotations

import logging
from typing import Any

import structlog
from structlog.typing import EventDict

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


def by_logger_level(logger: Any, method: str, event: EventDict) -> EventDict:
    """The structlog processor that drops what is below the level of the event's logger."""
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


def reset_levels(root: int) -> None:
    """Every logger back to the root's level, which becomes `root`."""
    _levels.clear()
    _levels[ROOT] = root
