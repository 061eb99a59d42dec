"""The `raftka` command line: one module per command group, `main` assembles them, `runner`
runs a command against a cluster and maps failures to exit codes."""

from raftka.cli.main import main

__all__ = ["main"]
