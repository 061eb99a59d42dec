"""Kafka 4.4's metadata hash (broker/group/metadata_hash.py, KIP-1101).

The expected values are what hash4j 0.22 (the XXH3-64 Kafka 4.4 ships, in the cached jars)
computed, once, for the same input: `Hashing.xxh3_64().hashBytesToLong` of bytes
`(i * 31 + 7) & 0xff`, and the hash streams of `Utils.computeTopicHash` /
`computeGroupHash` fed the same puts. A live Kafka 4.4's own group epoch record is checked in
tests/unit/test_consumer_group_records.py."""

from __future__ import annotations

import pytest

from raftka.broker.group.consumer_assignors import TopicMeta
from raftka.broker.group.metadata_hash import (
    group_hash,
    subscription_hash,
    topic_hash,
    with_hash,
    xxh3_64,
)

# (length, hash4j's xxh3_64 as a Java long): every branch of XXH3-64 (0, 1-3, 4-8, 9-16, 17-128,
# 129-240, and the long hash with a partial and whole 1024-byte blocks).
HASH4J = [
    (0, 3244421341483603138), (1, 5502495245947142431), (2, -6349423698422726873), (3, 1582743943441612892),
    (4, -2549016526957988167), (5, -5579736752565435579), (8, -2394039629164210130), (9, -3754995788605292611),
    (15, 6079324691992009783), (16, 9099606716676871632), (17, 2345212530088924167), (31, -6253418322204177903),
    (32, 278953543771952198), (33, 1844846513307983686), (63, 8562731308270388351), (64, -2508381663727503547),
    (65, -381843323958800864), (96, -3295001992457868926), (97, 6981672134384256435), (127, -6262838694800290624),
    (128, -492175581222641016), (129, -506823097681485574), (200, 1368452603177808973),
    (239, -3843338885400213691), (240, -3690920546649497853), (241, 809349449570470400),
    (255, -8533440102264939110), (256, -1403514104434996620), (300, -4995179824170898202),
    (1023, -1093476622474739461), (1024, 2575082683865311686), (1025, -4566685497618039422),
    (1088, -6815162950983329211), (2047, -4278671198590246626), (2048, 1870957339171033971),
    (2049, 5784106328234771061), (3000, 7977200675703330694), (5000, 6169931020318013678),
]

FOO = TopicMeta("6d0f4a3e-1111-4c1e-9a55-0123456789ab", "foo", 3, (("r1", "r2"), (), ("r1", "rack-\u00e9")))
BAR = TopicMeta("00000000-0000-0000-0000-00000000002a", "bar", 1)


@pytest.mark.parametrize(("n", "expected"), HASH4J, ids=[str(n) for n, _ in HASH4J])
def test_xxh3_64_is_hash4js(n: int, expected: int) -> None:
    assert xxh3_64(bytes((i * 31 + 7) & 0xFF for i in range(n))) == expected % (1 << 64)


def test_topic_and_group_hashes_are_kafkas() -> None:
    """FOO: a magic byte, id, name, partition count, then each partition and its replicas' racks
    (one rack outside ASCII: a string is hashed as UTF-16 code units and their count)."""
    assert topic_hash(FOO) == 2636886963427776541
    assert topic_hash(BAR) == 8614885214910307922
    assert group_hash({"foo": topic_hash(FOO), "bar": topic_hash(BAR)}) == 8717402992998763199
    assert subscription_hash(["foo", "bar", "gone"], {"foo": FOO, "bar": BAR}) == 8717402992998763199
    # A topic carries its hash once computed (the coordinator computes it off the event loop).
    assert with_hash(FOO).hash == 2636886963427776541 and with_hash(FOO) == FOO
    assert topic_hash(TopicMeta(FOO.topic_id, "foo", 3, FOO.racks, hash=7)) == 7


def test_what_moves_the_hash() -> None:
    assert subscription_hash([], {"foo": FOO}) == 0 == subscription_hash(["gone"], {"foo": FOO}) == group_hash({})
    same = topic_hash(BAR)
    for changed in (TopicMeta(BAR.topic_id, "bar", 2), TopicMeta(BAR.topic_id.replace("2a", "2b"), "bar", 1),
                    TopicMeta(BAR.topic_id, "bar", 1, (("r1",),)), TopicMeta(BAR.topic_id, "baz", 1)):
        assert topic_hash(changed) != same, changed


def test_the_coordinator_takes_the_racks_of_each_partitions_replicas() -> None:
    """Kafka's `partitionRacks`: each replica's broker's rack, when the broker is registered
    (fenced or not) and has one, sorted; a topic whose brokers have no rack hashes as none."""
    from raftka.broker.group.group_coordinator import _topic_meta
    from raftka.raft_meta.metadata.image import BrokerRegistration, PartitionImage, TopicImage

    brokers = {1: BrokerRegistration(1, "i1", 1, (), "rack-b"), 2: BrokerRegistration(2, "i2", 2, (), "rack-a", fenced=True),
               3: BrokerRegistration(3, "i3", 3, (), None)}
    topic = TopicImage("t", BAR.topic_id, {0: PartitionImage((1, 2, 3, 4), (1,), 1, 0, 0),
                                           1: PartitionImage((3,), (3,), 3, 0, 0)})
    meta = _topic_meta(topic, brokers)
    assert meta == TopicMeta(BAR.topic_id, "t", 2, (("rack-a", "rack-b"), ()))
    no_racks = {b: BrokerRegistration(b, "i", b, (), None) for b in (1, 2, 3)}
    assert _topic_meta(topic, no_racks) == TopicMeta(BAR.topic_id, "t", 2)
