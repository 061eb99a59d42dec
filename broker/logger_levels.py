"""The broker's loggers and their levels at run time: the BROKER_LOGGER config resource (type 8).

Kafka lists its log4j loggers (`root` and every logger created so far, each with its
effective level) and lets IncrementalAlterConfigs SET or DELETE a logger's level until the
process exits (never persisted). raftka's loggers are its structlog loggers, named
`raftka.<name>` after `structlog.get_logger("<name>")` (`raftka.broker.admin`, ...): the
logger factory installed by raftka/cli/logging_setup.py registers each one, and the
processor `drop_below_level` drops an event under its logger's effective level, which is
the level set on the logger or its nearest dotted ancestor, else root's.

Kafka's level names map onto Python's: TRACE and DEBUG both show debug events, FATAL is
critical. `LoggerLevels` is a pure table; `LEVELS` is this process's.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

import structlog

from raftka.client.protocol import ErrorCode

ROOT = "root"
PREFIX = "raftka"
# Kafka's LogLevelConfig.VALID_LOG_LEVELS with Python's numbers (its message lists them sorted)
VALID_LEVELS: dict[str, int] = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
                                "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": 5}
_NAMES = {number: name for name, number in reversed(VALID_LEVELS.items())}
# structlog's method name -> the level of its events
_METHOD_LEVELS = {"critical": logging.CRITICAL, "exception": logging.ERROR, "error": logging.ERROR,
                  "warn": logging.WARNING, "warning": logging.WARNING, "info": logging.INFO,
                  "debug": logging.DEBUG, "msg": logging.CRITICAL}


class LoggerLevelError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def level_name(number: int) -> str:
    return _NAMES.get(number) or next((n for n, v in VALID_LEVELS.items() if v <= number), "TRACE")


def logger_name(structlog_name: str) -> str:
    """The listed name of a structlog logger: under `raftka`, like the package."""
    if not structlog_name:
        return PREFIX
    return structlog_name if structlog_name.split(".")[0] == PREFIX else f"{PREFIX}.{structlog_name}"


class LoggerLevels:
    """Levels set at run time over a root level; thread-safe (brokers log from threads too)."""

    def __init__(self, root: int = logging.INFO) -> None:
        self._lock = threading.Lock()
        self._root = root
        self._set: dict[str, int] = {}
        self._known: set[str] = set()
        self._cache: dict[str, int] = {}

    def register(self, name: str) -> None:
        with self._lock:
            self._known.add(name)

    def effective(self, name: str) -> int:
        found = self._cache.get(name)
        if found is not None:
            return found
        with self._lock:
            probe = name
            level = self._root
            while probe:
                if probe in self._set:
                    level = self._set[probe]
                    break
                probe = probe.rpartition(".")[0]
            self._cache[name] = level
            return level

    def loggers(self) -> dict[str, str]:
        """root and every known or set logger -> its effective level's name (Kafka's view)."""
        with self._lock:
            names = sorted(self._known | set(self._set))
        return {ROOT: level_name(self._root), **{n: level_name(self.effective(n)) for n in names}}

    def set_level(self, name: str, level: str) -> None:
        number = self.check_set(name, level)
        with self._lock:
            if name == ROOT:
                self._root = number
            else:
                self._set[name] = number
                self._known.add(name)
            self._cache.clear()

    def unset(self, name: str) -> None:
        """The logger inherits again (Kafka: Log4j unsetLogLevel). Root's cannot be removed."""
        self.check_unset(name)
        with self._lock:
            self._set.pop(name, None)
            self._cache.clear()

    @staticmethod
    def check_set(name: str, level: str | None) -> int:
        number = VALID_LEVELS.get((level or "").upper()) if level is not None else None
        if number is None:
            raise LoggerLevelError(ErrorCode.INVALID_CONFIG,
                                   f"Cannot set the log level of {name} to {level} as it is not a supported log "
                                   f"level. Valid log levels are {', '.join(sorted(VALID_LEVELS))}")
        return number

    @staticmethod
    def check_unset(name: str) -> None:
        if name == ROOT:
            raise LoggerLevelError(ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed")


LEVELS = LoggerLevels()


def drop_below_level(logger: Any, method_name: str, event_dict: dict) -> dict:
    """structlog processor: drop an event under its logger's effective level."""
    name = getattr(logger, "raftka_name", PREFIX)
    if _METHOD_LEVELS.get(method_name, logging.INFO) < LEVELS.effective(name):
        raise structlog.DropEvent
    return event_dict


class NamedPrintLoggerFactory:
    """structlog.PrintLoggerFactory that remembers each logger's name (and registers it)."""

    def __init__(self, file=None, levels: LoggerLevels = LEVELS) -> None:
        self._file = file if file is not None else sys.stderr
        self._levels = levels

    def __call__(self, *args: Any) -> structlog.PrintLogger:
        name = logger_name(args[0] if args and isinstance(args[0], str) else "")
        self._levels.register(name)
        logger = _NamedPrintLogger(self._file)
        logger.raftka_name = name
        return logger


class _NamedPrintLogger(structlog.PrintLogger):
    raftka_name: str = PREFIX
