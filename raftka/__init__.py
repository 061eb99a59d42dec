"""raftka's entry point: the `raftka` command line and process-wide logging.

This package sits above every layer of DESIGN.md (it may import any of them,
lazily, per command); no layer imports it.
"""

__version__ = "0.1.0"
