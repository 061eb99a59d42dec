"""`make bench`: run every benchmark and print its table."""

from __future__ import annotations

import platform
import sys

from bench import log_bench


def main() -> None:
    from raftka.logging_setup import configure_logging

    configure_logging(level="WARNING")
    print(f"# raftka benchmarks — {platform.node()}, Python {sys.version.split()[0]}, "
          f"{platform.machine()}")
    print("\n## log/: partition-log append and read (1 KiB records, no fsync)\n")
    print(log_bench.format_table(log_bench.run()))


if __name__ == "__main__":
    main()
