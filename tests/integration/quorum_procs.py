"""Run quorum_node.py voters as real processes (used by the quorum tests and bench/quorum_bench.py)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from raftka.testing.local_cluster import free_low_port

NODE_SCRIPT = Path(__file__).with_name("quorum_node.py")
REPO = Path(__file__).resolve().parents[2]


class Voter:
    def __init__(self, node_id: int, voters: str, directory: Path, secret: str, extra_args: tuple[str, ...] = ()) -> None:
        self.node_id = node_id
        self.voters = voters
        self.directory = directory
        self.secret = secret
        self.extra_args = extra_args
        self.proc: subprocess.Popen | None = None
        self.events: queue.Queue = queue.Queue()
        self.seen: list[dict] = []

    def start(self) -> None:
        env = {**os.environ, "RAFTKA_QUORUM_SECRET": self.secret, "PYTHONPATH": str(REPO), "RAFTKA_LOG_LEVEL": "WARNING"}
        self.proc = subprocess.Popen(
            [sys.executable, str(NODE_SCRIPT), "--node-id", str(self.node_id), "--voters", self.voters, "--dir", str(self.directory),
             *self.extra_args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        self.seen = []
        self.events = queue.Queue()  # a fresh queue: nothing from a previous incarnation leaks in
        threading.Thread(target=self._read, args=(self.proc, self.events), daemon=True).start()

    @staticmethod
    def _read(proc: subprocess.Popen, sink: queue.Queue) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                sink.put(json.loads(line))
            except ValueError:
                pass

    def send(self, command: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def drain(self) -> list[dict]:
        while True:
            try:
                self.seen.append(self.events.get_nowait())
            except queue.Empty:
                return self.seen

    def wait_for(self, predicate, timeout: float, what: str):
        """Poll this voter's events until predicate(events) is truthy; return its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate(self.drain())
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"voter {self.node_id}: timed out after {timeout} s waiting for {what}")
            try:
                self.seen.append(self.events.get(timeout=0.05))
            except queue.Empty:
                pass

    @property
    def address(self) -> str:
        """This voter's "host:port" (its quorum port)."""
        return dict(item.split("=", 1) for item in self.voters.split(","))[str(self.node_id)]

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def logged(self, event: str) -> list[dict]:
        """The node's structlog events named `event` so far."""
        return [e for e in self.drain() if e.get("event") == event]

    def committed_keys(self) -> list[str]:
        return [e["key"] for e in self.drain() if e["event"] == "committed"]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


def make_voters(count: int, root: Path, secret: str = "quorum-test-secret", extra_args: tuple[str, ...] = ()) -> list[Voter]:
    used: set[int] = set()
    ports = [free_low_port(used) for _ in range(count)]
    spec = ",".join(f"{i + 1}=127.0.0.1:{port}" for i, port in enumerate(ports))
    return [Voter(i + 1, spec, root / f"node{i + 1}", secret, extra_args) for i in range(count)]


def active_epoch(voter: Voter) -> int | None:
    actives = [e for e in voter.drain() if e["event"] == "active"]
    return actives[-1]["epoch"] if actives else None
