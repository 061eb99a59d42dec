"""`raftka chaos run`: the Jepsen-style harness from the command line (see chaos/)."""

from __future__ import annotations

import json
import logging
import random
import time
from pathlib import Path

import structlog

from raftka.chaos.history import Op
from raftka.cli.options import security as command_security


def run(*, nodes: int, time_limit: float, nemesis: str, nemesis_interval: float, rate: float, topics: int,
        partitions: int, replication_factor: int, min_insync: int, acks: str, idempotence: bool,
        seed: int | None, out: str, against: str | None, partition_mode: str, unclean: bool,
        consumer_mode: str = "assign", segment_bytes: int | None = 16384, progress: bool = True,
        workload: str = "queue") -> int:
    from rich.console import Console

    from raftka.chaos.nemesis import parse_kinds
    from raftka.chaos.report import print_summary
    from raftka.chaos.run import RunConfig
    from raftka.chaos.run import run as run_chaos

    # The harness's own clients log every reconnect; keep the terminal for the progress line.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    console = Console(stderr=True)
    try:
        kinds = parse_kinds(nemesis)
    except ValueError as exc:
        console.print(f"raftka chaos run: {exc}")
        return 2
    if against and kinds:
        console.print(f"raftka chaos run: --against drives a cluster the harness does not own; nemeses "
                      f"{list(kinds)} need process and network control; expected --nemesis none")
        return 2
    if topics != 1:
        console.print(f"raftka chaos run: --topics {topics}; only 1 topic is supported (use --partitions)")
        return 2
    seed = seed if seed is not None else random.SystemRandom().randrange(1 << 31)
    extra = {"unclean.leader.election.enable": "true"} if unclean else {}
    config = RunConfig(out=Path(out), nodes=nodes, time_limit=time_limit, nemeses=kinds, interval=nemesis_interval,
                       rate=rate, partitions=partitions, replication_factor=min(replication_factor, nodes),
                       min_insync=min_insync, acks=acks, idempotence=idempotence, seed=seed, against=against,
                       partition_mode=partition_mode, extra_config=extra, consumer_mode=consumer_mode,
                       segment_bytes=segment_bytes, security=command_security(), workload=workload)
    counts = {"sends": 0, "ok": 0, "info": 0, "fail": 0, "polled": 0, "faults": 0}
    started = time.monotonic()
    phase_text = ["starting"]

    def on_op(o: Op) -> None:
        if o.f == "send":
            counts["sends" if o.type == "invoke" else o.type] += 1
        elif o.f == "poll" and o.type == "ok":
            counts["polled"] += len(o.value or ())
        elif o.f == "txn-poll" and o.type == "ok":
            counts["polled"] += len(o.value.get("records", ()))
        elif o.process == "nemesis" and isinstance(o.value, dict) and o.value.get("phase") == "start":
            counts["faults"] += 1

    def status() -> str:
        c = counts
        return (f"[{time.monotonic() - started:5.0f}s] {phase_text[0]} — sends {c['sends']} ok {c['ok']} "
                f"info {c['info']} fail {c['fail']} polled {c['polled']} faults {c['faults']}")

    console.print(f"chaos run: seed {seed}, {nodes} nodes, nemesis {','.join(kinds) or 'none'}, "
                  f"{time_limit:.0f}s of faults every {nemesis_interval:.0f}s, {consumer_mode} consumers")
    if progress and console.is_terminal:
        with console.status(status()) as live:
            def on_phase(text: str) -> None:
                phase_text[0] = text
                live.update(status())

            import threading

            stop = threading.Event()

            def ticker() -> None:
                while not stop.wait(0.5):
                    live.update(status())
            threading.Thread(target=ticker, daemon=True).start()
            try:
                result = run_chaos(config, on_op=on_op, on_phase=on_phase)
            finally:
                stop.set()
    else:
        def on_phase(text: str) -> None:
            phase_text[0] = text
            console.print(status())
        result = run_chaos(config, on_op=on_op, on_phase=on_phase)
    from raftka.chaos.history import read_history

    print_summary(result.check, result.directory, read_history(result.directory / "history.jsonl"))
    plot_error = json.loads((result.directory / "results.json").read_text()).get("plot_error")
    if plot_error:
        console.print(plot_warning(plot_error))
    return 0 if result.check.valid else 1


def plot_warning(plot_error: str) -> str:
    """Rich markup for the plot warning; the text is escaped so `pip install 'raftka[chaos]'`
    is printed as written (Rich took `[chaos]` for a style tag)."""
    from rich.markup import escape

    return f"[yellow]warning:[/yellow] {escape(plot_error)}"
