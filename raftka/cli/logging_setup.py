"""structlog configuration, done once per process.

JSON lines when stderr is not a terminal (services, CI, chaos nodes), a
coloured console renderer when it is (a developer at a shell).
"""

from __future__ import annotations

import logging
import os
import sys

import structlog

from raftka.broker import logger_levels

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
    # Levels per logger, changeable at run time (broker/logger_levels.py: the BROKER_LOGGER
    # config resource): structlog's own filter passes debug events on to `drop_below_level`.
    logger_levels.LEVELS.set_level(logger_levels.ROOT, logger_levels.level_name(numeric))
    structlog.configure(
        processors=[
            logger_levels.drop_below_level,
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(min(numeric, logging.DEBUG)),
        logger_factory=logger_levels.NamedPrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    # Third-party libraries (pysyncobj, py4j) log through stdlib logging.
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr)
    # The SDK (raftka.client) logs through stdlib logging (client/sdk_log.py): render its
    # records like our own structlog events, at the level asked for.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            _sdk_event,
            structlog.stdlib.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    ))
    sdk = logging.getLogger("raftka.client")
    sdk.handlers = [h for h in sdk.handlers if not isinstance(h, logging.StreamHandler)]
    sdk.addHandler(handler)
    # The SDK's info lines (group.assigned, ...) are noise in a console tool: warnings only,
    # unless a level was asked for.
    asked = level is not None or "RAFTKA_LOG_LEVEL" in os.environ
    sdk.setLevel(numeric if asked else max(numeric, logging.WARNING))
    sdk.propagate = False


def _sdk_event(_logger: object, _name: str, event_dict: dict) -> dict:
    """An SDK record's event name and fields (client/sdk_log.py) become the event's."""
    record = event_dict.get("_record")
    event = getattr(record, "raftka_event", None)
    if event is not None:
        event_dict["event"] = event
        for key, value in getattr(record, "raftka_fields", {}).items():
            event_dict.setdefault(key, value)
    return event_dict
