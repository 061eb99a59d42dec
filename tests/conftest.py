"""Test-process logging: warnings and above only (the SDK logs connection details at debug)."""

from raftka.logging_setup import configure_logging

configure_logging(level="WARNING")

# `pytester` runs the pytest plugin's own sessions (tests/integration/test_pytest_plugin.py).
pytest_plugins = ["pytester"]

# An application's own test folder, run by tests/packaging/test_installed_wheel.py in a fresh
# venv against the built wheel; collected here its `client`/`log` modules would be ambiguous.
collect_ignore = ["packaging/app_template"]
