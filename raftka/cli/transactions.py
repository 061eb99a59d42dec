"""`raftka transactions list|describe|describe-producers|abort`: kafka-transactions.sh's verbs.

Each returns the exit status (cli/runner.py): 0 done, 1 the cluster said no or was unreachable, 2 bad
arguments. `abort` repairs a hanging transaction (KIP-664): it finds the producer whose
transaction opened at --start-offset with DescribeProducers, then writes the ABORT marker
on the partition's leader with WriteTxnMarkers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import click

from raftka.cli.runner import USAGE, fail, run_with_cluster
from raftka.client.cluster import Cluster
from raftka.client.records import TopicPartition
from raftka.client.txn_admin import (
    abort_hanging_transaction,
    describe_producers,
    describe_transaction,
    list_transactions,
)

T = TypeVar("T")


def _run(command: str, bootstrap: str, action: Callable[[Cluster], Awaitable[T]]) -> tuple[int, T | None]:
    return run_with_cluster(f"transactions {command}", bootstrap, action)


def _table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())


def list_cmd(bootstrap: str, states: tuple[str, ...], producer_ids: tuple[int, ...]) -> int:
    status, found = _run("list", bootstrap, lambda c: list_transactions(c, states, producer_ids))
    if found is not None:
        _table([("TransactionalId", "Coordinator", "ProducerId", "TransactionState")]
               + [(t.transactional_id, str(t.coordinator), str(t.producer_id), t.state) for t in found])
    return status


def describe_cmd(bootstrap: str, transactional_id: str, now_ms: int) -> int:
    status, d = _run("describe", bootstrap, lambda c: describe_transaction(c, transactional_id))
    if d is not None:
        duration = str(now_ms - d.start_time_ms) if d.start_time_ms >= 0 else "None"
        _table([("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                 "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                 "TopicPartitions"),
                (str(d.coordinator), d.transactional_id, str(d.producer_id), str(d.producer_epoch),
                 d.state, str(d.timeout_ms), str(d.start_time_ms) if d.start_time_ms >= 0 else "None",
                 duration, ",".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions))])
    return status


def describe_producers_cmd(bootstrap: str, topic: str, partition: int) -> int:
    tp = TopicPartition(topic, partition)
    status, found = _run("describe-producers", bootstrap, lambda c: describe_producers(c, tp))
    if found is not None:
        _table([("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                 "LastTimestamp", "CurrentTransactionStartOffset")]
               + [(str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch),
                   str(p.last_sequence), str(p.last_timestamp),
                   str(p.current_txn_start_offset) if p.current_txn_start_offset >= 0 else "None")
                  for p in found])
    return status


def abort_cmd(bootstrap: str, topic: str, partition: int, start_offset: int) -> int:
    if start_offset < 0:
        return fail("transactions abort", f"--start-offset {start_offset} must be >= 0", USAGE)
    tp = TopicPartition(topic, partition)
    status, producer = _run("abort", bootstrap,
                            lambda c: abort_hanging_transaction(c, tp, start_offset))
    if producer is not None:
        click.echo(f"Aborted the transaction of producer {producer.producer_id} (epoch "
                   f"{producer.producer_epoch}) open on {topic}-{partition} since offset {start_offset}.")
    return status
