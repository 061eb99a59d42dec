"""The pure parts of the SDK's KIP-848 membership: the target assignment by topic id
resolved through the metadata, the reconciliation plan (revoke first, then assign), and
the topic ids the metadata keeps."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from raftka.client.consumer_membership import reconciliation, resolve_assignment
from raftka.client.metadata import ClusterMetadata
from raftka.client.records import TopicPartition

ORDERS, REFUNDS = uuid.UUID(int=7), uuid.UUID(int=9)
NAMES = {ORDERS: "orders", REFUNDS: "refunds"}


@pytest.mark.parametrize(("by_id", "known", "resolved", "unknown"), [
    ({}, NAMES, set(), set()),
    ({ORDERS: [0, 2]}, NAMES, {("orders", 0), ("orders", 2)}, set()),
    ({ORDERS: [1], REFUNDS: [0]}, NAMES, {("orders", 1), ("refunds", 0)}, set()),
    # A topic the metadata does not know yet: the rest is usable, the id waits for a refresh.
    ({ORDERS: [1], REFUNDS: [0]}, {ORDERS: "orders"}, {("orders", 1)}, {REFUNDS}),
    ({ORDERS: []}, NAMES, set(), set()),
])
def test_resolve_assignment(by_id, known, resolved, unknown):
    got, missing = resolve_assignment(by_id, known.get)
    assert got == {TopicPartition(*tp) for tp in resolved}
    assert missing == unknown


T = TopicPartition


@pytest.mark.parametrize(("owned", "target", "revoked", "added"), [
    ((), (T("a", 0), T("a", 1)), set(), [T("a", 0), T("a", 1)]),  # join
    ((T("a", 0), T("a", 1)), (T("a", 1),), {T("a", 0)}, []),  # a partition moves away
    ((T("a", 1),), (T("a", 2), T("a", 1), T("a", 0)), set(), [T("a", 0), T("a", 2)]),
    ((T("a", 0),), (T("b", 0),), {T("a", 0)}, [T("b", 0)]),  # revoke and assign in one step
    ((T("a", 0),), (), {T("a", 0)}, []),  # everything moves away
    ((T("a", 0),), (T("a", 0),), set(), []),
])
def test_reconciliation_revokes_what_moves_and_adds_only_what_is_new(owned, target, revoked, added):
    assert reconciliation(owned, target) == (revoked, added)


def _metadata_response(topic_id: uuid.UUID):
    partition = SimpleNamespace(partition_index=0, leader_id=1, leader_epoch=0, replica_nodes=[1],
                                isr_nodes=[1], offline_replicas=[], error_code=0)
    return SimpleNamespace(brokers=[SimpleNamespace(node_id=1, host="h", port=1, rack=None)],
                           topics=[SimpleNamespace(name="orders", error_code=0, topic_id=topic_id,
                                                   is_internal=False, partitions=[partition])],
                           controller_id=1, cluster_id="c")


def test_metadata_keeps_topic_ids_and_finds_names_by_id():
    metadata = ClusterMetadata().updated(_metadata_response(ORDERS), all_topics=True)
    assert metadata.topic_id("orders") == ORDERS
    assert metadata.topic_name(ORDERS) == "orders"
    assert metadata.topic_name(REFUNDS) is None
    assert metadata.topic_id("refunds") is None
    # Metadata before v10 (or a broker without ids) answers the null id: no id is known.
    old = ClusterMetadata().updated(_metadata_response(uuid.UUID(int=0)), all_topics=True)
    assert old.topic_id("orders") is None and old.topic_name(uuid.UUID(int=0)) is None
