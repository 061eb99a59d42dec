"""`raftka perf produce` / `raftka perf consume`: load generators.

Like kafka-producer-perf-test and kafka-consumer-perf-test: a line every
reporting interval, a final line with rates and latency percentiles, `--json`
for JSON Lines instead (one object per window, then one `"type": "result"`),
and in a terminal a live progress bar on stderr. `--producers N` runs N
producer processes side by side (this command re-run as hidden workers that
speak JSON Lines) and merges their reports. Exit status: 0 done, 1 records
failed or the cluster is unreachable, 2 bad arguments.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import click
import trio

from raftka.cli.interrupts import stop_on_signal
from raftka.cli.runner import FAILED, USAGE, fail
from raftka.client.errors import KafkaError
from raftka.testing.perf import (
    ConsumePerfConfig,
    ConsumeReport,
    ProducePerfConfig,
    ProduceResult,
    ProduceWindow,
    _Progress,
    consume_perf,
    format_consume,
    format_result,
    format_window,
    merge_results,
    merge_windows,
    produce_perf,
)


def _fail(command: str, message: str, status: int = FAILED) -> int:
    return fail(f"perf {command}", message, status)


def _emit_json(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


@contextmanager
def _live_progress(total: int, label: str, progress: _Progress, enabled: bool):
    """A transient progress bar on stderr, refreshed from a thread reading
    `progress` (so the event loop never waits on the terminal). Yields a
    function that prints a line above the bar."""
    if not enabled:
        yield lambda line: click.echo(line)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                   console=console, transient=True)
    task = bar.add_task(label, total=total, rate="")
    stop = threading.Event()
    start = time.perf_counter()

    def refresh() -> None:
        while not stop.wait(0.25):
            elapsed = time.perf_counter() - start
            rate = f"{progress.acked / elapsed:,.0f} rec/s" if elapsed > 0 else ""
            bar.update(task, completed=progress.acked, rate=rate)

    thread = threading.Thread(target=refresh, daemon=True)
    with bar:
        thread.start()
        try:
            # Periodic lines go to stdout, above the bar on stderr.
            yield lambda line: print(line, flush=True)  # rich redirects stdout above the bar
        finally:
            stop.set()
            thread.join()


def _show_progress(as_json: bool) -> bool:
    return not as_json and sys.stderr.isatty()


# --- produce -----------------------------------------------------------------
def produce(config: ProducePerfConfig, *, producers: int = 1, as_json: bool = False,
            worker: bool = False) -> int:
    if producers < 1:
        return _fail("produce", f"--producers must be >= 1, got {producers}", USAGE)
    if producers > 1:
        return _produce_parallel(config, producers, as_json)
    progress = _Progress()
    interrupted = [False]

    def run(echo: Callable[[str], None]) -> tuple[ProduceResult, list[float]]:
        def on_window(window: ProduceWindow) -> None:
            if as_json or worker:
                _emit_json(window.to_json())
            else:
                echo(format_window(window))

        async def main() -> tuple[ProduceResult, list[float]]:
            async with trio.open_nursery() as nursery:
                sending = trio.CancelScope()  # Ctrl-C ends the sends; the summary still prints
                await nursery.start(stop_on_signal, sending, nursery.cancel_scope)
                outcome = await produce_perf(config, on_window, progress, sending=sending)
                interrupted[0] = sending.cancel_called
                nursery.cancel_scope.cancel()
            return outcome

        return trio.run(main)

    try:
        with _live_progress(config.num_records, "produce", progress,
                            _show_progress(as_json or worker)) as echo:
            result, samples = run(echo)
    except ValueError as exc:
        return _fail("produce", str(exc), USAGE)
    except KafkaError as exc:
        return _fail("produce", f"topic {config.topic!r}: {exc}")
    if interrupted[0]:
        click.echo(f"raftka perf produce: interrupted after {progress.sent:,} of {config.num_records:,} "
                   "records; the summary counts the acknowledged ones", err=True)
    if worker:
        _emit_json({**result.to_json(), "samples": [round(s, 3) for s in samples]})
    elif as_json:
        _emit_json(result.to_json())
    else:
        click.echo(format_result(result))
    return 130 if interrupted[0] else 1 if result.errors else 0


def worker_command(config: ProducePerfConfig, records: int, throughput: float) -> list[str]:
    """The command line of one hidden worker process for `--producers`."""
    cmd = [sys.executable, "-m", "raftka", "perf", "produce", "--worker",
           "--bootstrap-server", config.bootstrap, "--topic", config.topic,
           "--num-records", str(records), "--record-size", str(config.record_size),
           "--throughput", repr(throughput), "--acks", config.acks,
           "--batch-size", str(config.batch_size), "--linger-ms", repr(config.linger_ms),
           "--reporting-interval", str(int(config.report_interval_s * 1000))]
    if config.compression:
        cmd += ["--compression", config.compression]
    from raftka.cli.options import path

    if path() is not None:
        cmd += ["--command-config", str(path())]
    return cmd


def _produce_parallel(config: ProducePerfConfig, producers: int, as_json: bool) -> int:
    share, extra = divmod(config.num_records, producers)
    throughput = config.throughput / producers if config.throughput > 0 else -1
    lines: queue.Queue[tuple[int, str | None]] = queue.Queue()
    procs: list[subprocess.Popen[str]] = []

    def pump(index: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put((index, line))
        lines.put((index, None))

    progress = _Progress()
    windows: dict[int, ProduceWindow] = {}
    finals: dict[int, dict[str, Any]] = {}
    try:
        for i in range(producers):
            records = share + (1 if i < extra else 0)
            proc = subprocess.Popen(worker_command(config, records, throughput),
                                    stdout=subprocess.PIPE, text=True)
            procs.append(proc)
            threading.Thread(target=pump, args=(i, proc), daemon=True).start()
        open_streams = producers
        with _live_progress(config.num_records, f"produce x{producers}", progress,
                            _show_progress(as_json)) as echo:
            while open_streams:
                index, line = lines.get()
                if line is None:
                    open_streams -= 1
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue  # not ours (a library printing): skip
                if obj.get("type") == "window":
                    window = ProduceWindow(obj["records"], obj["bytes"], obj["elapsed_s"],
                                           obj["avg_latency_ms"], obj["max_latency_ms"])
                    progress.acked += window.records
                    windows[index] = window
                    if len(windows) == producers - len(finals):
                        merged = merge_windows(list(windows.values()))
                        windows.clear()
                        if as_json:
                            _emit_json(merged.to_json())
                        else:
                            echo(format_window(merged))
                elif obj.get("type") == "result":
                    finals[index] = obj
                    windows.pop(index, None)
        codes = [proc.wait() for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if len(finals) != producers:
        return _fail("produce", f"{producers - len(finals)} of {producers} producer processes "
                     f"ended without a result (exit codes {codes})")
    results = [_result_from_json(obj) for obj in finals.values()]
    merged = merge_results(results, [obj["samples"] for obj in finals.values()])
    if as_json:
        _emit_json({**merged.to_json(), "producers": producers})
    else:
        click.echo(format_result(merged))
    return 1 if merged.errors or any(codes) else 0


def _result_from_json(obj: dict[str, Any]) -> ProduceResult:
    from raftka.testing.perf import LatencySummary

    return ProduceResult(obj["records"], obj["bytes"], obj["elapsed_s"], obj["errors"],
                         LatencySummary(**obj["latency_ms"]), obj.get("first_error"))


# --- consume -----------------------------------------------------------------
def consume(config: ConsumePerfConfig, *, as_json: bool = False) -> int:
    progress = _Progress()
    try:
        with _live_progress(config.num_records, "consume", progress,
                            _show_progress(as_json)) as echo:
            def on_window(report: ConsumeReport) -> None:
                if as_json:
                    _emit_json(report.to_json())
                else:
                    echo(format_consume(report))

            report = trio.run(consume_perf, config, on_window, progress)
    except ValueError as exc:
        return _fail("consume", str(exc), USAGE)
    except KafkaError as exc:
        return _fail("consume", f"topic {config.topic!r}: {exc}")
    if as_json:
        _emit_json(report.to_json())
    else:
        click.echo(format_consume(report))
    if report.records < config.num_records:
        return _fail("consume", f"only {report.records} of {config.num_records} records "
                     f"arrived within {config.timeout_ms:.0f} ms of quiet")
    return 0


def produce_config(**kw: Any) -> ProducePerfConfig:
    """Build the config from CLI options (acks 'all' spelled as Kafka's -1 too)."""
    from raftka.cli.options import security

    if security() is not None:  # --command-config
        kw["producer_config"] = {**kw.get("producer_config", {}), "security": security()}
    config = ProducePerfConfig(**kw)
    if config.acks == "-1":
        config = replace(config, acks="all")
    return config
