"""`raftka cluster up`: N local nodes until Ctrl-C, with their logs prefixed by node."""

from __future__ import annotations

import json
import signal
import sys
import threading

import click

from raftka.client.local_cluster import READY_MARKER, ClusterRunning, LocalCluster
from raftka.cluster_control import ControlError, ControlServer, describe_exit, send


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


def up(nodes: int, data_dir: str, port_base: int, log_level: str, quiet: bool, secure: bool = False) -> int:
    lock = threading.Lock()

    def on_line(node_id: int, line: str) -> None:
        if quiet or READY_MARKER in line:
            return
        with lock:
            click.echo(f"[node-{node_id}] {_short(line)}", err=True)

    setup = None
    try:
        if secure:
            from raftka.secure_cluster import secure_cluster

            cluster, setup = secure_cluster(data_dir, nodes, port_base=port_base, log_level=log_level,
                                            on_line=on_line)
        else:
            cluster = LocalCluster(data_dir, nodes, port_base=port_base, log_level=log_level, on_line=on_line,
                                   metrics=True)
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
    try:
        cluster.start()
        cluster.wait_ready(timeout=90)
    except (RuntimeError, TimeoutError) as exc:
        click.echo(f"raftka cluster up: {exc}", err=True)
        cluster.stop()
        return 1
    bootstrap = cluster.bootstrap_servers
    click.echo(f"raftka cluster ready: {nodes} node(s), bootstrap servers {bootstrap}")
    if setup is not None:
        config = f" --command-config {setup.client_properties_path}"
        click.echo(setup.settings(bootstrap))
        click.echo(
            "Try next (in another terminal):\n"
            f"  .venv/bin/raftka topics create --topic demo --partitions 3 --bootstrap-server "
            f"{cluster.nodes[1].bootstrap}{config}\n"
            f"  seq 1 5 | .venv/bin/raftka produce --topic demo --bootstrap-server {cluster.nodes[1].bootstrap}{config}\n"
            f"  .venv/bin/raftka users create --user alice --bootstrap-server {cluster.nodes[1].bootstrap}{config}\n"
            f"Ctrl-C stops every node cleanly; data stays in {cluster.data_dir}.")
    else:
        click.echo(
            "Try next (in another terminal):\n"
            f"  .venv/bin/raftka topics create --topic demo --partitions 3 --replication-factor "
            f"{min(3, nodes)} --bootstrap-server {cluster.nodes[1].bootstrap}\n"
            f"  seq 1 5 | .venv/bin/raftka produce --topic demo --bootstrap-server {cluster.nodes[1].bootstrap}\n"
            f"  .venv/bin/raftka consume --topic demo --from-beginning --max-messages 5 "
            f"--bootstrap-server {cluster.nodes[1].bootstrap}\n"
            f"  .venv/bin/raftka topics describe --bootstrap-server {cluster.nodes[1].bootstrap}\n"
            f"  .venv/bin/raftka quorum status --bootstrap-server {cluster.nodes[1].bootstrap}\n"
            f"  .venv/bin/raftka cluster kill --node 2 --data-dir {data_dir}   "
            "(watch a failover; then: cluster start --node 2)\n"
            "Any Kafka client works too, e.g. confluent-kafka with bootstrap.servers="
            f"{bootstrap}\nPrometheus metrics: {' '.join(cluster.metrics_urls().values())}\n"
            f"Ctrl-C stops every node cleanly; data stays in {cluster.data_dir}."
        )
    sys.stdout.flush()
    control = ControlServer(cluster, cluster.data_dir)
    control.start()
    reported: set[tuple[int, int]] = set()  # (node, pid) whose exit was reported
    try:
        while not stop.wait(0.5):
            for node in cluster.nodes.values():
                process = node.process
                if process is None or node.running or node.stopped_by_us or (node.node_id, process.pid) in reported:
                    continue
                reported.add((node.node_id, process.pid))
                alive = [n.node_id for n in cluster.nodes.values() if n.running]
                click.echo(
                    f"raftka cluster up: node {node.node_id} exited ({describe_exit(process.returncode)}); "
                    f"node(s) {alive or 'none'} keep serving. Bring it back with: "
                    f"raftka cluster start --node {node.node_id} --data-dir {cluster.data_dir}", err=True)
    finally:
        control.close()
    click.echo("stopping the cluster ...", err=True)
    cluster.stop()
    return 0


def control(data_dir: str, op: str, node: int | None) -> int:
    """`raftka cluster kill|stop|start|restart|status`: ask the running `cluster up`."""
    try:
        reply = send(data_dir, op, node)
    except ControlError as exc:
        click.echo(f"raftka cluster {op}: {exc}", err=True)
        return 1
    except (OSError, ValueError) as exc:
        click.echo(f"raftka cluster {op}: {exc}", err=True)
        return 1
    click.echo(reply.get("message", ""), err=not reply.get("ok"))
    return 0 if reply.get("ok") else 1
