"""`raftka cluster up`: N local nodes until Ctrl-C.

Each node's log goes to DATA_DIR/node-i/server.log; `--verbose` also streams the
lines here, prefixed by node, until the shutdown begins (a normal Ctrl-C shutdown
is not worth a screen of lines). The ready banner is the last thing printed
while the cluster runs, and its hints name `raftka` the way this process was
started (on PATH, by path, or `python -m raftka`).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import sys
import threading

import click

from raftka.testing.cluster_control import ControlError, ControlServer, describe_exit, send
from raftka.testing.local_cluster import READY_MARKER, ClusterRunning, LocalCluster, free_port_base


def _short(line: str) -> str:
    """A JSON log line as `level event key=value ...`; other lines unchanged."""
    try:
        record = json.loads(line)
    except ValueError:
        return line
    if not isinstance(record, dict):
        return line
    event = record.pop("event", "")
    level = record.pop("level", "")
    record.pop("timestamp", None)
    rest = " ".join(f"{k}={v}" for k, v in record.items())
    return f"{level:<7} {event} {rest}".rstrip()


def raftka_command(argv0: str | None = None, executable: str | None = None) -> str:
    """How the user can run raftka again: `raftka` when that is what PATH finds, else the
    path this process was started by, else `python -m raftka`."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    if not argv0 or argv0.endswith(("__main__.py", "-c")) or os.path.basename(argv0) != "raftka":
        return f"{shlex.quote(executable)} -m raftka"
    found = shutil.which("raftka")
    if found and os.path.realpath(found) == os.path.realpath(argv0):
        return "raftka"
    return shlex.quote(argv0)


def up(nodes: int, data_dir: str, port_base: int, log_level: str, verbose: bool, secure: bool = False,
       separate_metadata_log_dir: bool = False) -> int:
    lock = threading.Lock()
    stopping = threading.Event()

    def on_line(node_id: int, line: str) -> None:
        if not verbose or stopping.is_set() or READY_MARKER in line:
            return
        with lock:
            click.echo(f"[node-{node_id}] {_short(line)}", err=True)

    setup = None
    try:
        if secure:
            from raftka.testing.secure_cluster import secure_cluster

            cluster, setup = secure_cluster(data_dir, nodes, port_base=port_base, log_level=log_level,
                                            on_line=on_line, separate_metadata_log_dir=separate_metadata_log_dir)
        else:
            cluster = LocalCluster(data_dir, nodes, port_base=port_base, log_level=log_level, on_line=on_line,
                                   metrics=True, separate_metadata_log_dir=separate_metadata_log_dir)
    except ValueError as exc:
        click.echo(f"raftka cluster up: {exc}", err=True)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        cluster.prepare()
    except ClusterRunning as exc:
        click.echo(f"raftka cluster up: {exc}", err=True)
        return 1
    busy = cluster.busy_ports()
    if busy:
        node_id, role, port = busy[0]
        other = free_port_base(len(cluster.nodes))
        click.echo(f"raftka cluster up: 127.0.0.1:{port} (node {node_id}'s {role} port) is in use"
                   f"{f' and {len(busy) - 1} more' if len(busy) > 1 else ''}; stop what holds it "
                   f"(ss -ltnp 'sport = :{port}'), or use other ports: raftka cluster up "
                   f"--port-base {other} (make run PORT_BASE={other})", err=True)
        return 1
    logs = cluster.data_dir / "node-<i>" / "server.log"
    added = len(cluster.nodes) - nodes  # broker-only nodes `cluster add-node` made here before
    click.echo(f"starting {nodes} node(s){f' and {added} broker-only node(s)' if added else ''}; their logs: {logs}"
               + ("" if verbose else " (--verbose streams them here)"), err=True)
    try:
        cluster.start()
        cluster.wait_ready(timeout=90)
    except (RuntimeError, TimeoutError) as exc:
        click.echo(f"raftka cluster up: {exc}", err=True)
        stopping.set()
        cluster.stop()
        return 1
    bootstrap = cluster.bootstrap_servers
    first = cluster.nodes[1].bootstrap
    raftka = raftka_command()
    with lock:
        click.echo(f"raftka cluster ready: {len(cluster.nodes)} node(s), bootstrap servers {bootstrap}")
        if setup is not None:
            config = f" --command-config {setup.client_properties_path}"
            click.echo(setup.settings(bootstrap))
            click.echo(
                "Try next (in another terminal):\n"
                f"  {raftka} topics create --topic demo --partitions 3 --bootstrap-server {first}{config}\n"
                f"  seq 1 5 | {raftka} produce --topic demo --bootstrap-server {first}{config}\n"
                f"  {raftka} users create --user alice --bootstrap-server {first}{config}\n"
                f"Node logs: {logs}. Ctrl-C stops every node cleanly; data stays in {cluster.data_dir}.")
        else:
            click.echo(
                "Try next (in another terminal):\n"
                f"  {raftka} topics create --topic demo --partitions 3 --replication-factor "
                f"{min(3, nodes)} --bootstrap-server {first}\n"
                f"  seq 1 5 | {raftka} produce --topic demo --bootstrap-server {first}\n"
                f"  {raftka} consume --topic demo --from-beginning --max-messages 5 "
                f"--bootstrap-server {first}\n"
                f"  {raftka} topics describe --bootstrap-server {first}\n"
                f"  {raftka} quorum status --bootstrap-server {first}\n"
                f"  {raftka} cluster kill --node 2 --data-dir {data_dir}   "
                "(watch a failover; then: cluster start --node 2)\n"
                f"  {raftka} cluster add-node --data-dir {data_dir}   (grow: a broker-only node)\n"
                "Any Kafka client works too, e.g. confluent-kafka with bootstrap.servers="
                f"{bootstrap}\nPrometheus metrics: {' '.join(cluster.metrics_urls().values())}\n"
                f"Node logs: {logs}. Ctrl-C stops every node cleanly; data stays in {cluster.data_dir}."
            )
        sys.stdout.flush()
    control = ControlServer(cluster, cluster.data_dir)
    control.start()
    reported: set[tuple[int, int]] = set()  # (node, pid) whose exit was reported
    try:
        while not stop.wait(0.5):
            for node in list(cluster.nodes.values()):  # `cluster add-node` adds to it from another thread
                process = node.process
                if process is None or node.running or node.stopped_by_us or (node.node_id, process.pid) in reported:
                    continue
                reported.add((node.node_id, process.pid))
                alive = [n.node_id for n in list(cluster.nodes.values()) if n.running]
                click.echo(
                    f"raftka cluster up: node {node.node_id} exited ({describe_exit(process.returncode)}); "
                    f"node(s) {alive or 'none'} keep serving. Its log: {node.log_path}. Bring it back with: "
                    f"{raftka} cluster start --node {node.node_id} --data-dir {cluster.data_dir}", err=True)
    finally:
        control.close()
    stopping.set()
    click.echo("stopping the cluster ...", err=True)
    cluster.stop()
    click.echo(f"stopped; data and logs stay in {cluster.data_dir}", err=True)
    return 0


def control(data_dir: str, op: str, node: int | None) -> int:
    """`raftka cluster kill|stop|start|restart|status`: ask the running `cluster up`."""
    try:
        reply = send(data_dir, op, node)
    except (ControlError, OSError, ValueError) as exc:
        click.echo(f"raftka cluster {op}: {exc}", err=True)
        return 1
    click.echo(reply.get("message", ""), err=not reply.get("ok"))
    return 0 if reply.get("ok") else 1
