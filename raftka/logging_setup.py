"""structlog configuration, done once per process.

JSON lines when stderr is not a terminal (services, CI, chaos nodes), a
coloured console renderer when it is (a developer at a shell).
"""

from __future__ import annotations

import logging
import os
import sys

import structlog

_configured = False


def configure_logging(level: str | None = None, json: bool | None = None) -> None:
    """Configure structlog and stdlib logging for this process (idempotent)."""
    global _configured
    if _configured:
        return
    _configured = True
    level_name = (level or os.environ.get("RAFTKA_LOG_LEVEL", "INFO")).upper()
    numeric = getattr(logging, level_name, logging.INFO)
    if json is None:
        json = not sys.stderr.isatty()
    renderer: structlog.types.Processor
    if json:
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    # Third-party libraries (pysyncobj, py4j) log through stdlib logging.
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr)
