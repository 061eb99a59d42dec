"""Test-process logging: warnings and above only (the SDK logs connection details at debug)."""

from raftka.logging_setup import configure_logging

configure_logging(level="WARNING")
