"""Data-driven tests of partition reassignment (KIP-455): image + request -> records or errors,
then the image those records produce (apply, snapshot round trip)."""

from __future__ import annotations

import pytest

from raftka.raft_meta.controller import controller_decisions as cd
from raftka.raft_meta.controller.reassignment_decisions import (
    OngoingReassignment,
    Reassignment,
    alter_partition_reassignments,
    completed,
    list_partition_reassignments,
)
from raftka.raft_meta.metadata.apply import apply, replay
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.metadata.records import (
    FenceBroker,
    Partition,
    PartitionChange,
    RegisterBroker,
    Topic,
    UnfenceBroker,
)
from raftka.raft_meta.metadata.snapshot import decode_snapshot, encode_snapshot, image_digest

L = (("PLAINTEXT", "h", 1),)
T = "tid"


def cluster(*extra, brokers=4) -> MetadataImage:
    """Brokers 1..n registered at offsets 1..n and unfenced, then `extra` records."""
    records = [RegisterBroker(i, f"inc{i}", L) for i in range(1, brokers + 1)]
    records += [UnfenceBroker(i, i) for i in range(1, brokers + 1)]
    return replay(list(enumerate([*records, *extra], start=1)))


def topic(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1):
    return [Topic("t", T), Partition(T, 0, replicas, isr, leader)]


def commit(image: MetadataImage, records) -> MetadataImage:
    for record in records:
        image, delta = apply(image, record, image.offset + 1)
        assert delta.accepted, (record, delta.reason)
    return image


def moving(replicas=(2, 3, 4, 1), isr=(1, 2, 3), leader=1, adding=(4,), removing=(1,), epoch=1):
    """The records that put partition t-0 in the middle of a reassignment."""
    return [*topic(), PartitionChange(T, 0, 0, replicas=replicas, adding_replicas=adding, removing_replicas=removing,
                                      isr=None if isr == (1, 2, 3) else isr, leader=None if leader == 1 else leader)]


# (name, image, request, expected records, expected errors by (topic, partition))
CASES = [
    ("start: adding = target - replicas, removing = replicas - target, replicas = target + removing",
     cluster(*topic()), [Reassignment("t", 0, (2, 3, 4))],
     [PartitionChange(T, 0, 0, replicas=(2, 3, 4, 1), adding_replicas=(4,), removing_replicas=(1,))], {}),
    ("shrink to replicas already in the ISR completes at once; the removed leader hands over",
     cluster(*topic()), [Reassignment("t", 0, (2, 3))],
     [PartitionChange(T, 0, 0, leader=2, isr=(2, 3), replicas=(2, 3), adding_replicas=(), removing_replicas=())], {}),
    ("reorder only: replicas change, nothing moves, the leader stays",
     cluster(*topic()), [Reassignment("t", 0, (3, 2, 1))],
     [PartitionChange(T, 0, 0, replicas=(3, 2, 1), adding_replicas=(), removing_replicas=())], {}),
    ("the same replicas: no record",
     cluster(*topic()), [Reassignment("t", 0, (1, 2, 3))], [], {}),
    ("cancel: back to the original replicas, the adding ones leave",
     cluster(*moving()), [Reassignment("t", 0, None)],
     [PartitionChange(T, 0, 1, replicas=(2, 3, 1), adding_replicas=(), removing_replicas=())], {}),
    ("cancel when the leader is an adding replica: leadership returns to the original set",
     cluster(*moving(isr=(1, 2, 3, 4), leader=4)), [Reassignment("t", 0, None)],
     [PartitionChange(T, 0, 1, leader=2, isr=(1, 2, 3), replicas=(2, 3, 1), adding_replicas=(),
                      removing_replicas=())], {}),
    ("cancel with no reassignment: NO_REASSIGNMENT_IN_PROGRESS",
     cluster(*topic()), [Reassignment("t", 0, None)], [], {("t", 0): "NO_REASSIGNMENT_IN_PROGRESS"}),
    ("a new target over a running one starts from the current replicas (adding ones included)",
     cluster(*moving(), brokers=5), [Reassignment("t", 0, (2, 3, 5))],
     [PartitionChange(T, 0, 1, replicas=(2, 3, 5, 4, 1), adding_replicas=(5,), removing_replicas=(4, 1))], {}),
    ("unknown topic and unknown partition",
     cluster(*topic()), [Reassignment("nope", 0, (1,)), Reassignment("t", 7, (1,))], [],
     {("nope", 0): "UNKNOWN_TOPIC_OR_PARTITION", ("t", 7): "UNKNOWN_TOPIC_OR_PARTITION"}),
    ("unregistered broker, duplicate broker, empty target: INVALID_REPLICA_ASSIGNMENT",
     cluster(*topic(), Topic("u", "uid"), Partition("uid", 0, (1,), (1,), 1), Partition("uid", 1, (1,), (1,), 1)),
     [Reassignment("t", 0, (1, 9)), Reassignment("u", 0, (2, 2)), Reassignment("u", 1, ())], [],
     {("t", 0): "INVALID_REPLICA_ASSIGNMENT", ("u", 0): "INVALID_REPLICA_ASSIGNMENT",
      ("u", 1): "INVALID_REPLICA_ASSIGNMENT"}),
    ("a fenced but registered broker may be a target (Kafka checks registration only)",
     cluster(*topic(), FenceBroker(4, 4)), [Reassignment("t", 0, (1, 2, 4))],
     [PartitionChange(T, 0, 0, replicas=(1, 2, 4, 3), adding_replicas=(4,), removing_replicas=(3,))], {}),
    ("a partition named twice: INVALID_REQUEST, the others go ahead",
     cluster(*topic(), Topic("u", "uid"), Partition("uid", 0, (1,), (1,), 1)),
     [Reassignment("t", 0, (1,)), Reassignment("t", 0, (2,)), Reassignment("u", 0, (1, 2))],
     [PartitionChange("uid", 0, 0, replicas=(1, 2), adding_replicas=(2,), removing_replicas=())],
     {("t", 0): "INVALID_REQUEST"}),
]


@pytest.mark.parametrize("name,image,request_,expected,errors", CASES, ids=[c[0] for c in CASES])
def test_alter_partition_reassignments(name, image, request_, expected, errors):
    decision = alter_partition_reassignments(image, request_)
    assert list(decision.records) == expected
    assert {k: e.name for k, e in decision.errors.items()} == errors
    commit(image, decision.records)  # every record is accepted by apply


def test_replication_factor_change_refused_when_not_allowed():
    decision = alter_partition_reassignments(cluster(*topic()), [Reassignment("t", 0, (1, 2))],
                                             allow_replication_factor_change=False)
    assert decision.errors[("t", 0)].name == "INVALID_REPLICATION_FACTOR"
    same_size = alter_partition_reassignments(cluster(*topic()), [Reassignment("t", 0, (2, 3, 4))],
                                              allow_replication_factor_change=False)
    assert not same_size.errors and same_size.records


def test_whole_lifecycle_start_catch_up_complete():
    """Start moving 1 -> 4; the leader's ISR expansion with 4 finishes it in the same record:
    replicas = target, ISR = ISR ∩ target, leadership leaves the removed broker 1."""
    image = cluster(*topic())
    image = commit(image, alter_partition_reassignments(image, [Reassignment("t", 0, (2, 3, 4))]).records)
    part = image.partition(T, 0)
    assert (part.replicas, part.adding_replicas, part.removing_replicas, part.isr) == ((2, 3, 4, 1), (4,), (1,),
                                                                                      (1, 2, 3))
    assert part.target_replicas == (2, 3, 4)
    assert list_partition_reassignments(image) == [OngoingReassignment("t", 0, (2, 3, 4, 1), (4,), (1,))]
    # An ISR change that does not bring every target replica in keeps the reassignment going.
    shrink = cd.alter_partition(image, 1, 1, T, 0, 0, 1, (1, 2))
    assert shrink.records == (PartitionChange(T, 0, 1, isr=(1, 2)),)
    expand = cd.alter_partition(image, 1, 1, T, 0, 0, 1, (1, 2, 3, 4))
    assert expand.records == (PartitionChange(T, 0, 1, leader=2, isr=(2, 3, 4), replicas=(2, 3, 4),
                                              adding_replicas=(), removing_replicas=()),)
    image = commit(image, expand.records)
    part = image.partition(T, 0)
    assert (part.replicas, part.isr, part.leader, part.leader_epoch, part.reassigning) == ((2, 3, 4), (2, 3, 4), 2,
                                                                                          1, False)
    assert list_partition_reassignments(image) == []


def test_completion_waits_while_no_live_target_can_lead():
    """The leader (1) is removed, but the only in-sync target replica is fenced: not finished yet."""
    image = cluster(*moving(replicas=(4, 1), isr=(1,), adding=(4,), removing=(1,)), FenceBroker(4, 4))
    part = image.partition(T, 0)
    assert completed(image, part, isr=(1, 4)) is None


def test_list_named_partitions_skips_unknown_and_idle():
    image = cluster(*moving())
    assert list_partition_reassignments(image, [("t", 0), ("t", 5), ("x", 0)]) == [
        OngoingReassignment("t", 0, (2, 3, 4, 1), (4,), (1,))]
    assert list_partition_reassignments(cluster(*topic()), [("t", 0)]) == []


@pytest.mark.parametrize("bad,reason", [
    (PartitionChange(T, 0, 0, adding_replicas=(9,)), "adding replicas [9] must be distinct members"),
    (PartitionChange(T, 0, 0, adding_replicas=(1,), removing_replicas=(1,)), "overlap"),
    (PartitionChange(T, 0, 0, removing_replicas=(1, 2, 3)), "no target replica"),
])
def test_apply_rejects_inconsistent_reassignment_fields(bad, reason):
    image = cluster(*topic())
    after, delta = apply(image, bad, image.offset + 1)
    assert not delta.accepted and reason in delta.reason
    assert after.partition(T, 0) == image.partition(T, 0)


def test_isr_change_keeps_a_running_reassignment_and_snapshot_round_trips_it():
    image = cluster(*moving())
    image = commit(image, [PartitionChange(T, 0, 1, isr=(1, 2))])
    part = image.partition(T, 0)
    assert (part.adding_replicas, part.removing_replicas) == ((4,), (1,))
    again = decode_snapshot(encode_snapshot(image))
    assert again.partition(T, 0) == part and image_digest(again) == image_digest(image)
    idle = cluster(*topic())
    assert decode_snapshot(encode_snapshot(idle)).partition(T, 0).reassigning is False



def test_unregister_broker_moves_its_leaderships_then_removes_it():
    from raftka.raft_meta.controller.controller_errors import ControllerError
    from raftka.raft_meta.controller.unregistration_decisions import unregister_broker
    from raftka.raft_meta.metadata.records import UnregisterBroker

    image = cluster(*topic())
    decision = unregister_broker(image, 1)
    assert decision.records == (FenceBroker(1, 1), PartitionChange(T, 0, 0, leader=2, isr=(2, 3)),
                                UnregisterBroker(1, 1))
    after = commit(image, decision.records)
    assert 1 not in after.brokers and after.partition(T, 0).replicas == (1, 2, 3)  # offline replica stays
    fenced = commit(image, [FenceBroker(4, 4)])
    assert unregister_broker(fenced, 4).records == (UnregisterBroker(4, 4),)
    with pytest.raises(ControllerError) as refused:
        unregister_broker(after, 1)
    assert refused.value.name == "BROKER_ID_NOT_REGISTERED"


def test_leader_balance_moves_leaders_back_only_above_the_percentage():
    """Kafka's leader.imbalance.per.broker.percentage: broker 1 prefers 4 partitions and leads
    1 of them (75 % imbalanced); broker 2 prefers 4 and leads 3 (25 %)."""
    from raftka.raft_meta.controller.leader_balance_decisions import imbalance, rebalance_leaders

    records = [Topic("t", T)]
    for p in range(4):  # preferred 1; leader 1 only for p0
        records.append(Partition(T, p, (1, 2, 3), (1, 2, 3), 1 if p == 0 else 2))
    for p in range(4, 8):  # preferred 2; leader 2 except p7
        records.append(Partition(T, p, (2, 3, 1), (1, 2, 3), 3 if p == 7 else 2))
    image = cluster(*records)
    assert imbalance(image) == {1: (3, 4), 2: (1, 4)}
    moved = {r.partition: r.leader for r in rebalance_leaders(image, 30).records}
    assert moved == {1: 1, 2: 1, 3: 1}  # only broker 1 is over 30 %
    assert {r.partition for r in rebalance_leaders(image, 0).records} == {1, 2, 3, 7}
    assert rebalance_leaders(image, 80).records == ()


@pytest.mark.parametrize("value,ok", [("*", True), ("", True), ("0:101,0:102,1:101", True), ("0-101", False),
                                      ("x:1", False), ("0:", False)])
def test_throttled_replicas_topic_configs_are_accepted_and_validated(value, ok):
    """Not enforced yet, but accepted with Kafka's format check, so tools that set them work."""
    from raftka.raft_meta.config.topic_configs import validate as validate_topic_configs

    for key in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"):
        if ok:
            validate_topic_configs({key: value})
        else:
            with pytest.raises(ValueError, match=key):
                validate_topic_configs({key: value})


def test_throttle_rates_and_imbalance_percentage_in_server_properties(tmp_path):
    from raftka.raft_meta.config.node_config import parse_node_config
    from tests.unit.test_raft_meta_config import _props

    props = _props(tmp_path, **{"leader_replication_throttled_rate": "1048576",
                                "follower_replication_throttled_rate": "1048576",
                                "leader_imbalance_per_broker_percentage": "25"})
    config = parse_node_config(props, env={})
    assert config.leader_imbalance_per_broker_percentage == 25
    assert config.raw["leader.replication.throttled.rate"] == "1048576"
    with pytest.raises(Exception, match="percentage"):
        parse_node_config({**props, "leader.imbalance.per.broker.percentage": "101"}, env={})


@pytest.mark.parametrize("client_rack,expected", [
    ("", -1),            # no client.rack: the leader
    ("r1", -1),          # the leader is in the client's rack
    ("r2", 3),           # two followers in r2: the one with the highest log end
    ("r9", -1),          # no replica in that rack
])
def test_rack_aware_replica_selector(client_rack, expected):
    from raftka.broker.replication.replica_selector import preferred_read_replica

    racks = {1: "r1", 2: "r2", 3: "r2", 4: "r2"}
    ends = {2: 90, 3: 100, 4: 200}  # 4 is not in the ISR
    assert preferred_read_replica(client_rack, 1, (1, 2, 3), ends, 50, racks.get) == expected


def test_rack_aware_replica_selector_skips_followers_without_the_offset():
    from raftka.broker.replication.replica_selector import preferred_read_replica

    assert preferred_read_replica("r2", 1, (1, 2), {2: 40}, 50, {1: "r1", 2: "r2"}.get) == -1


def test_a_move_waiting_for_a_live_leader_finishes_once_the_target_is_back():
    """Target [4] already in the ISR, leader 1 removed, 4 fenced: the ISR change could not
    finish it; once 4 is unfenced, the controller's tick does, without any ISR change."""
    from raftka.raft_meta.controller.reassignment_decisions import pending_completions

    image = cluster(*moving(replicas=(4, 1), isr=(1, 4), adding=(4,), removing=(1,)), FenceBroker(4, 4))
    assert pending_completions(image) == ()
    image = commit(image, [UnfenceBroker(4, 4)])
    assert pending_completions(image) == (PartitionChange(T, 0, 1, leader=4, isr=(4,), replicas=(4,),
                                                          adding_replicas=(), removing_replicas=()),)
