"""One metadata-quorum voter in its own process, driven by the quorum tests and bench.

Usage: python quorum_node.py --node-id 1 --voters 1=127.0.0.1:21001,2=... --dir D
(secret from RAFTKA_QUORUM_SECRET; cluster id from --cluster-id; --pre-auth-timeout S
overrides QuorumSettings.pre_auth_timeout; --no-fsync is metadata.log.fsync.enable=false).

stdin commands, one per line:
  submit PREFIX N     submit N Config records keyed PREFIX-0..N-1, one at a
                      time, retrying each with the same request id until it commits
  parallel PREFIX N W submit N Config records with W submitters at a time (throughput)
  topics PREFIX N     submit N topic creations (a Topic and 6 Partition records in one
                      RecordBatch, as the controller writes them), one at a time
  status              print the quorum status
stdout: JSON lines
  {"event": "ready"}
  {"event": "committed", "offset": O, "key": K}      every applied Config record
  {"event": "active", "epoch": E, "t": monotonic}    this node became the active controller
  {"event": "ack", "key": K, "offset": O, "latency": seconds}
  {"event": "status", ...}
  {"event": "quorum.accept_paused", "level": "warning", ...}   the node's own structlog events
                                                             at RAFTKA_LOG_LEVEL (default WARNING)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import threading
import time

import structlog
import trio

from raftka.raft_meta.metadata.metadata_loader import MetadataLoader
from raftka.raft_meta.metadata.records import Config, Partition, RecordBatch, Topic, encode_record
from raftka.raft_meta.quorum.quorum import QuorumSettings, SubmitError, open_quorum

_emit_lock = threading.Lock()  # the tick thread logs too: one whole line at a time


def emit(**fields) -> None:
    line = json.dumps(fields, default=str) + "\n"
    with _emit_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


class _EmitLogger:
    """structlog's output as JSON lines among the events above."""

    def msg(self, **fields) -> None:
        emit(**fields)

    debug = info = warning = error = critical = exception = msg


def configure_logging() -> None:
    level = getattr(logging, os.environ.get("RAFTKA_LOG_LEVEL", "WARNING").upper(), logging.WARNING)
    structlog.configure(
        processors=[structlog.processors.add_log_level, lambda _logger, _name, event_dict: event_dict],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=lambda *_: _EmitLogger(),
        cache_logger_on_first_use=True,
    )


def _config(prefix: str, i: int):
    return Config("cluster", "", f"{prefix}-{i}", str(i), request_id=f"{prefix}-{i}")


def _topic(prefix: str, i: int):
    topic_id = f"00000000-0000-4000-8000-{i:012d}"
    parts = [encode_record(Partition(topic_id, p, (1, 2, 3), (1, 2, 3), 1 + p % 3)) for p in range(6)]
    return RecordBatch((encode_record(Topic(f"{prefix}-{i}", topic_id)), *parts), request_id=f"{prefix}-{i}")


async def submit_many(quorum, prefix: str, count: int, make=_config, first: int = 0, step: int = 1) -> None:
    for i in range(first, count, step):
        key = f"{prefix}-{i}"
        record = make(prefix, i)
        started = time.monotonic()
        while True:
            try:
                offset = await quorum.submit(record, timeout=3.0)
                break
            except SubmitError:
                # Ambiguous or no leader: retry with the same request id (deduplicated by apply).
                await quorum.wait_change()
        emit(event="ack", key=key, offset=offset, latency=time.monotonic() - started)


async def watch_active(loader: MetadataLoader) -> None:
    last = None
    while True:
        epoch = await loader.wait_active_controller()
        if epoch != last:
            emit(event="active", epoch=epoch, t=time.monotonic())
            last = epoch
        await loader.quorum.wait_state_change()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--node-id", type=int, required=True)
    parser.add_argument("--voters", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--cluster-id", default="AAAAAAAAAAAAAAAAAAAAAA")
    parser.add_argument("--pre-auth-timeout", type=float, default=None)
    parser.add_argument("--no-fsync", action="store_true")
    args = parser.parse_args()
    configure_logging()
    settings = QuorumSettings() if args.pre_auth_timeout is None else QuorumSettings(pre_auth_timeout=args.pre_auth_timeout)
    if args.no_fsync:
        settings = dataclasses.replace(settings, fsync=False)
    voters = {int(k): v for k, v in (item.split("=", 1) for item in args.voters.split(","))}

    def publish(delta, image) -> None:
        if delta.accepted and isinstance(delta.record, Config):
            emit(event="committed", offset=delta.offset, key=delta.record.name)

    async with open_quorum(args.node_id, voters, os.environ["RAFTKA_QUORUM_SECRET"], args.dir,
                           settings=settings) as quorum:
        loader = MetadataLoader(quorum, args.cluster_id, [publish])
        async with trio.open_nursery() as nursery:
            await nursery.start(loader.run)
            nursery.start_soon(watch_active, loader)
            emit(event="ready")
            stdin = trio.wrap_file(sys.stdin)
            while line := await stdin.readline():
                words = line.split()
                if words[:1] == ["submit"]:
                    nursery.start_soon(submit_many, quorum, words[1], int(words[2]))
                elif words[:1] == ["topics"]:
                    nursery.start_soon(submit_many, quorum, words[1], int(words[2]), _topic)
                elif words[:1] == ["parallel"]:
                    for w in range(int(words[3])):
                        nursery.start_soon(submit_many, quorum, words[1], int(words[2]), _config, w, int(words[3]))
                elif words[:1] == ["status"]:
                    s = quorum.status()
                    emit(event="status", leader=s.leader_id, term=s.term, is_leader=s.is_leader, last_offset=s.last_offset,
                         fetch_times={str(k): list(v) for k, v in s.fetch_times.items()}, now_ms=int(time.time() * 1000))
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
