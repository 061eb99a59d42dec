"""The SDK's loggers: stdlib `logging`, silent unless the application configures logging.

A library must not print or configure logging (docs/architecture.md). The SDK's
modules log `log.info("event.name", key=value, ...)` as the server's structlog
loggers do, but through `logging.getLogger("raftka.client....")`: the record's
message is `event.name key=value ...`, and the event name and fields ride in
the record (`raftka_event`, `raftka_fields`) so the CLI and the server, which
configure structlog, render them like their own events
(raftka/cli/logging_setup.py). A NullHandler on "raftka.client" keeps Python's
last-resort handler from printing warnings to stderr in an application that
configured nothing.
"""

from __future__ import annotations

import logging
from typing import Any

ROOT = "raftka.client"
logging.getLogger(ROOT).addHandler(logging.NullHandler())


class SdkLogger:
    """`log.info("event", key=value)` over a stdlib logger; cheap when the level is off."""

    __slots__ = ("_logger",)

    def __init__(self, name: str) -> None:
        self._logger = logging.getLogger(name)

    def _log(self, level: int, event: str, fields: dict[str, Any], exc_info: bool = False) -> None:
        if not self._logger.isEnabledFor(level):
            return
        text = " ".join([event, *(f"{k}={v}" for k, v in fields.items())])
        self._logger.log(level, "%s", text, exc_info=exc_info,
                         extra={"raftka_event": event, "raftka_fields": fields})

    def debug(self, event: str, **fields: Any) -> None:
        self._log(logging.DEBUG, event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._log(logging.INFO, event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._log(logging.WARNING, event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._log(logging.ERROR, event, fields)

    def exception(self, event: str, **fields: Any) -> None:
        self._log(logging.ERROR, event, fields, exc_info=True)


def get_logger(name: str) -> SdkLogger:
    return SdkLogger(name)
