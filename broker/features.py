"""The KIP-584 feature levels this broker supports and the cluster runs at, as ApiVersions
v3+ reports them (`kafka-features describe`). raftka has no UpdateFeatures: each finalized
level is fixed, the highest level raftka implements.

- metadata.version 3.8-IV0 (level 20): the newest level whose inter-broker requests raftka
  serves. A Kafka broker at 3.7-IV4 or 3.8-IV0 fetches with Fetch v16 and lists offsets with
  ListOffsets v8, both served; 3.9-IV0 moves to Fetch v17 (KIP-853's replica directory id),
  which raftka does not serve. (raftka's own replica fetchers ask Fetch v11.) The
  record types the levels up to 3.8-IV0 add for features raftka lacks (delegation tokens,
  JBOD directory assignment) are never written. The floor is Kafka 4's, 3.3-IV3 (level 7).
- kraft.version 0: a static voter set (`controller.quorum.voters`); 1 is KIP-853's dynamic
  quorum, which raftka does not have.
- transaction.version 2, as Kafka 4.4 finalizes it: level 1 is the flexible
  `__transaction_state` value (TransactionLogValue v1, which raftka writes:
  broker/txn/txn_records.py), level 2 KIP-890 part 2 (broker/txn/txn_state.py): a client
  that sees it finalized uses EndTxn v5 (an epoch bump per transaction), Produce v12 and
  TxnOffsetCommit v5 (the partition is added to the transaction by its leader or the
  group coordinator, no AddPartitionsToTxn/AddOffsetsToTxn). Clients that do not look
  at the feature (librdkafka, kafka-python) keep the classic protocol, which stays served.
  KIP-890 part 1 (partition leaders verify, AddPartitionsToTxn v4) is not gated by a level:
  Kafka gates it by `transaction.partition.verification.enable`, as raftka does.
- group.version 1: the KIP-848 consumer protocol (ConsumerGroupHeartbeat,
  broker/group/consumer_group_state.py), as Kafka 4.4 finalizes it.
- share.version 2, as Kafka 4.4 finalizes it: level 1 is KIP-932's share groups
  (ShareGroupHeartbeat, broker/group/share_group_state.py; 0 turns them off in Kafka), level 2
  KIP-1191's dead-letter queue (broker/group/share_dlq.py: a group's
  `errors.deadletterqueue.topic.name` takes the records it rejects or releases at the delivery
  limit). Level 2 depends on no other feature.

Kafka's rules for the answer (ApiVersionsResponse.Builder): a finalized level of 0 is not
listed, and before ApiVersions v4 a supported feature whose minimum is 0 is left out
(KAFKA-17492: older clients cannot read it).
"""

from __future__ import annotations

from dataclasses import dataclass

from raftka.broker.group.consumer_group_state import GROUP_VERSION


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    min_version: int
    max_version: int
    finalized: int  # the cluster's level (raftka: fixed)


METADATA_VERSION_3_8_IV0 = 20
METADATA_VERSION_MINIMUM = 7  # 3.3-IV3, the oldest level Kafka 4 runs
SHARE_VERSION = 2  # Kafka's ShareVersion.SV_2: share groups with their dead-letter queue
TRANSACTION_VERSION = 2  # KIP-890 part 2 (Kafka's TV_2)

FEATURES: tuple[Feature, ...] = (
    Feature("metadata.version", METADATA_VERSION_MINIMUM, METADATA_VERSION_3_8_IV0, METADATA_VERSION_3_8_IV0),
    Feature("kraft.version", 0, 0, 0),
    Feature("transaction.version", 0, TRANSACTION_VERSION, TRANSACTION_VERSION),
    Feature("group.version", 0, GROUP_VERSION, GROUP_VERSION),
    Feature("share.version", 0, SHARE_VERSION, SHARE_VERSION),
)

# ApiVersions' first version that lists supported features whose minimum is 0.
FIRST_VERSION_WITH_LEVEL_0_FEATURES = 4


def supported_features(api_version: int, features: tuple[Feature, ...] = FEATURES) -> list[dict]:
    """The `supported_features` entries of an ApiVersions v3+ answer at `api_version`."""
    return [{"name": f.name, "min_version": f.min_version, "max_version": f.max_version}
            for f in features
            if f.min_version > 0 or api_version >= FIRST_VERSION_WITH_LEVEL_0_FEATURES]


def finalized_features(features: tuple[Feature, ...] = FEATURES) -> list[dict]:
    """The `finalized_features` entries: every feature finalized above level 0."""
    return [{"name": f.name, "min_version_level": f.finalized, "max_version_level": f.finalized}
            for f in features if f.finalized != 0]
