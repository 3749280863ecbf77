"""structlog set-up: readable console lines for people, JSON lines for machines. The
loggers themselves and their levels live in ottla.protocol.loggers, which every layer
can import."""

from __future__ import annotations

import logging
import sys

import structlog

from ottla.protocol.loggers import by_logger_level, get_logger, reset_levels

__all__ = ("configure", "get_logger")


def configure(level: str = "info", fmt: str = "console") -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    reset_levels(numeric)
    renderer = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            by_logger_level,
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        # Every level reaches by_logger_level, which applies each logger's own.
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
