"""Transaction administration over a Cluster, as Kafka's Admin client does it (KIP-664):
list and describe transactions, describe a partition's producers, and abort a hanging
transaction by writing its ABORT marker. Used by `raftka transactions`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from raftka.client.cluster import Cluster
from raftka.client.errors import KafkaConnectionError, KafkaError, error_for_code
from raftka.client.protocol import ApiKey, ErrorCode
from raftka.client.records import TopicPartition

COORDINATOR_TRANSACTION = 1


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1 when no transaction is open
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1: no open transaction on the partition


class NoSuchTransactionError(KafkaError):
    """No producer on the partition has an open transaction starting at the given offset."""

    name = "NO_SUCH_TRANSACTION"


async def list_transactions(cluster: Cluster, states: Iterable[str] = (),
                            producer_ids: Iterable[int] = ()) -> list[TransactionListing]:
    """Every transaction known to any broker (each coordinator lists its own)."""
    metadata = await cluster.refresh_metadata()
    out: list[TransactionListing] = []
    for node_id in sorted(metadata.brokers):
        try:
            response = await cluster.send_to(node_id, ApiKey.LIST_TRANSACTIONS, {
                "state_filters": list(states), "producer_id_filters": list(producer_ids),
                "duration_filter": -1})
        except KafkaConnectionError:
            continue
        if response.error_code:
            raise error_for_code(response.error_code, f"ListTransactions on broker {node_id}")
        out += [TransactionListing(t.transactional_id, t.producer_id, t.transaction_state, node_id)
                for t in response.transaction_states]
    return sorted(out, key=lambda t: t.transactional_id)


async def find_transaction_coordinator(cluster: Cluster, transactional_id: str) -> int:
    response = await cluster.send_any(ApiKey.FIND_COORDINATOR,
                                      {"key": transactional_id, "key_type": COORDINATOR_TRANSACTION})
    if response.error_code:
        raise error_for_code(response.error_code,
                             f"FindCoordinator for transactional id {transactional_id!r}")
    if cluster.metadata.broker(response.node_id) is None:
        await cluster.refresh_metadata()
    return response.node_id


async def describe_transaction(cluster: Cluster, transactional_id: str) -> TransactionDescription:
    node = await find_transaction_coordinator(cluster, transactional_id)
    response = await cluster.send_to(node, ApiKey.DESCRIBE_TRANSACTIONS,
                                     {"transactional_ids": [transactional_id]})
    (t,) = response.transaction_states
    if t.error_code:
        raise error_for_code(t.error_code, f"DescribeTransactions for {transactional_id!r}")
    return TransactionDescription(
        t.transactional_id, node, t.transaction_state, t.producer_id, t.producer_epoch,
        t.transaction_timeout_ms, t.transaction_start_time_ms,
        tuple(TopicPartition(topic.topic, p) for topic in t.topics for p in topic.partitions))


async def describe_producers(cluster: Cluster, tp: TopicPartition) -> list[ProducerState]:
    """The active producers of `tp`, from its leader."""
    await cluster.refresh_metadata([tp.topic])
    leader = cluster.metadata.leader_for(tp)
    if leader is None:
        raise error_for_code(ErrorCode.LEADER_NOT_AVAILABLE, f"{tp.topic}/{tp.partition} has no leader")
    response = await cluster.send_to(leader, ApiKey.DESCRIBE_PRODUCERS, {
        "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}]})
    for t in response.topics:
        for p in t.partitions:
            if p.error_code:
                raise error_for_code(p.error_code, f"DescribeProducers for {tp.topic}/{tp.partition}"
                                     + (f": {p.error_message}" if p.error_message else ""))
            return [ProducerState(a.producer_id, a.producer_epoch, a.last_sequence, a.last_timestamp,
                                  a.coordinator_epoch, a.current_txn_start_offset)
                    for a in p.active_producers]
    raise error_for_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"{tp.topic}/{tp.partition} is not in the DescribeProducers answer")


async def abort_hanging_transaction(cluster: Cluster, tp: TopicPartition,
                                    start_offset: int) -> ProducerState:
    """Write an ABORT marker for the transaction open on `tp` since `start_offset` (KIP-664,
    kafka-transactions.sh abort --start-offset): the producer comes from DescribeProducers,
    the marker goes to the partition's leader with WriteTxnMarkers. Returns the producer."""
    producers = await describe_producers(cluster, tp)
    match = [p for p in producers if p.current_txn_start_offset == start_offset]
    if not match:
        open_ = sorted(p.current_txn_start_offset for p in producers if p.current_txn_start_offset >= 0)
        raise NoSuchTransactionError(
            f"no open transaction starts at offset {start_offset} of {tp.topic}/{tp.partition}; "
            f"open transactions start at {open_ or 'none'}")
    producer = match[0]
    leader = cluster.metadata.leader_for(tp)
    assert leader is not None
    response = await cluster.send_to(leader, ApiKey.WRITE_TXN_MARKERS, {"markers": [{
        "producer_id": producer.producer_id, "producer_epoch": producer.producer_epoch,
        "transaction_result": False, "coordinator_epoch": max(producer.coordinator_epoch, 0),
        "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}]}]})
    for marker in response.markers:
        for t in marker.topics:
            for p in t.partitions:
                if p.error_code:
                    raise error_for_code(p.error_code, f"WriteTxnMarkers (ABORT) on "
                                                       f"{tp.topic}/{tp.partition}")
    return producer
