"""The run report: results.json, latency/throughput plots with fault windows shaded, a summary table."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from raftka.chaos.checker import ANOMALIES, CheckResult
from raftka.chaos.history import NEMESIS, Op, nemesis_spans, nemesis_windows

COLORS = {"kill": "tab:red", "leader-kill": "tab:red", "controller-kill": "tab:purple", "pause": "tab:orange",
          "partition": "tab:blue", "isolate-leader-then-kill": "tab:brown",
          "corrupt": "tab:olive", "quorum": "tab:pink", "restart": "tab:green"}


def send_latencies(ops: Sequence[Op]) -> list[tuple[float, float, str]]:
    """(invoke time, latency s, outcome) per completed send."""
    started: dict[Any, float] = {}
    out = []
    for o in ops:
        if o.f != "send":
            continue
        if o.type == "invoke":
            started[o.value] = o.time
        elif o.value in started:
            out.append((started[o.value], o.time - started.pop(o.value), o.type))
    return out


def write_report(directory: Path, result: CheckResult, ops: Sequence[Op], config: Any) -> dict[str, Any]:
    summary = result.to_json()
    summary["faults"] = [{"fault": f, "start": s, "end": e} for f, s, e in nemesis_windows(ops)]
    summary["corruptions"] = corruption_checks(ops)
    try:
        plot(directory, ops, f"chaos run {directory.name}: {'VALID' if result.valid else 'INVALID'}")
    except ModuleNotFoundError as exc:
        summary["plot_error"] = (f"plots skipped: {exc.name} is not installed "
                                 "(pip install 'raftka[chaos]')")
    except Exception as exc:  # a plot failure must not hide the verdict
        summary["plot_error"] = repr(exc)
    (directory / "results.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def fault_targets(ops: Sequence[Op]) -> dict[str, str]:
    """Fault id -> the nodes it hit, as plots label them ("n2", "n1,n3")."""
    return {str(o.value.get("id")): ",".join(f"n{n}" for n in o.value.get("nodes") or ())
            for o in ops if o.process == NEMESIS and isinstance(o.value, dict) and o.value.get("phase") == "start"}


# Jepsen's words: "info" is a send whose outcome is unknown (it timed out, or the connection
# dropped after the request went out); the checker allows it either way.
OUTCOME_LABELS = {"ok": "send ok (acknowledged)", "fail": "send fail (refused, not written)",
                  "info": "send info (indeterminate: may or may not be written)"}


def plot(directory: Path, ops: Sequence[Op], title: str = "chaos run") -> list[str]:
    """latency.png and throughput.png: each fault shaded and labelled with the nodes it hit,
    the run's verdict in the title. Returns every text drawn (titles, labels, legends)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lat = send_latencies(ops)
    windows = list(nemesis_spans(ops))
    targets = fault_targets(ops)
    end = max((o.time for o in ops), default=1.0)

    def shade(ax) -> None:
        seen = set()
        for fid, fault, start, stop in windows:
            label = fault if fault not in seen else None
            seen.add(fault)
            ax.axvspan(start, stop if stop is not None else end, color=COLORS.get(fault, "grey"), alpha=0.15,
                       label=label)
            where = targets.get(fid)
            ax.annotate(f"{fault} {where}" if where else fault, (start, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(2, -2), textcoords="offset points", va="top", fontsize=6, rotation=90)

    fig, ax = plt.subplots(figsize=(13, 4))
    for outcome, color in (("ok", "tab:green"), ("fail", "tab:red"), ("info", "tab:orange")):
        pts = [(t, 1000 * d) for t, d, o in lat if o == outcome]
        if pts:
            ax.scatter(*zip(*pts, strict=True), s=4, color=color, label=OUTCOME_LABELS[outcome])
    shade(ax)
    ax.set_title(f"{title}: send latency")
    ax.set_yscale("log")
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("send latency (ms)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7)  # beside: faults are labelled inside
    fig.tight_layout()
    fig.savefig(directory / "latency.png", dpi=100)
    texts = _texts(fig)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(13, 4))
    buckets: dict[str, dict[int, int]] = {"send ok": {}, "polled": {}}
    for o in ops:
        if o.f == "send" and o.type == "ok":
            buckets["send ok"][int(o.time)] = buckets["send ok"].get(int(o.time), 0) + 1
        elif o.f == "poll" and o.type == "ok" and o.value:
            buckets["polled"][int(o.time)] = buckets["polled"].get(int(o.time), 0) + len(o.value)
    for name, counts in buckets.items():
        xs = list(range(int(end) + 1))
        ax.plot(xs, [counts.get(x, 0) for x in xs], label=f"{name} / s")
    shade(ax)
    ax.set_title(f"{title}: throughput")
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("messages per second")
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7)  # beside: faults are labelled inside
    fig.tight_layout()
    fig.savefig(directory / "throughput.png", dpi=100)
    texts += _texts(fig)
    plt.close(fig)
    return texts


def _texts(fig) -> list[str]:
    found = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    return [t for t in found if t]


def corruption_checks(ops: Sequence[Op]) -> list[dict[str, Any]]:
    """The corrupt nemesis's verdicts: what was damaged and whether the node reported it."""
    return [o.value for o in ops if o.process == "nemesis" and o.f == "corrupt" and isinstance(o.value, dict)
            and o.value.get("phase") == "checked"]


def summary_rows(result: CheckResult, ops: Sequence[Op] = ()) -> list[tuple[str, str]]:
    s = result.stats
    if "transactions" in s:  # the txn workload (chaos/txn_checker.py)
        return txn_summary_rows(result)
    counts = result.counts()
    rows = [("valid", str(result.valid)), ("sends", str(s["sends"])), ("acknowledged", str(s["acknowledged"])),
            ("failed", str(s["failed"])), ("indeterminate", str(s["indeterminate"])),
            ("values polled", str(s["values_polled"]))]
    for name in ANOMALIES:
        mark = " (forbidden)" if name in result.forbidden and counts.get(name) else ""
        rows.append((name, f"{counts.get(name, 0)}{mark}"))
    checks = corruption_checks(ops)
    if checks:
        rows.append(("corruptions detected", f"{sum(1 for c in checks if c.get('detected'))}/{len(checks)}"))
    rows += [("worst lag (s)", str(s["worst_lag_s"])),
             ("longest unavailability (s)", f"{s['longest_unavailability_s']} {s['unavailability_window'] or ''}")]
    return rows


def print_summary(result: CheckResult, directory: Path, ops: Sequence[Op] = ()) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"chaos run {directory.name}: {'VALID' if result.valid else 'INVALID'}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for name, value in summary_rows(result, ops):
        style = "bold red" if "forbidden" in value or value == "False" else None
        table.add_row(name, value, style=style)
    console = Console()
    console.print(table)
    for name in result.failed():
        console.print(f"[red]{name}[/red] e.g. {json.dumps(result.anomalies[name][:3], default=str)}")
    console.print(f"report: {directory}")


def txn_summary_rows(result: CheckResult) -> list[tuple[str, str]]:
    from raftka.chaos.txn_checker import TXN_ANOMALIES

    s = result.stats
    counts = result.counts()
    rows = [("valid", str(result.valid)), ("inputs", str(s["inputs"]))]
    rows += [(f"transactions {k}", str(v)) for k, v in sorted(s["transactions"].items())]
    rows += [(f"drained {k}", str(v)) for k, v in sorted(s["drained"].items())]
    for name in TXN_ANOMALIES:
        rows.append((name, f"{counts.get(name, 0)}{' (forbidden)' if counts.get(name) else ''}"))
    return rows
