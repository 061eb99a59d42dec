"""Valid requests of every API the broker advertises, at every advertised version (plus the
declared ApiVersions versions), aimed at the fuzzer's own
topics and group so that mutations reach the handlers' real paths.

Each entry builds its frame from an rng, so produce requests carry fresh batches and
names vary a little; `FUZZ_TOPICS` must exist before the fuzzer runs.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from raftka.client.protocol import ApiKey, encode_request
from raftka.client.protocol.api_keys import ADVERTISED_VERSIONS, DECLARED_VERSIONS
from tests.fuzz.batches import valid_batch

FUZZ_TOPICS = {"fuzz-a": 3, "fuzz-b": 1}  # name -> partitions (created by the runner)
FUZZ_GROUP = "fuzz-group"
FUZZ_SHARE_GROUP = "fuzz-share-group"
CLIENT_ID = "fuzzer"


@dataclass(frozen=True)
class Entry:
    api_key: ApiKey
    version: int
    body: Callable[[random.Random], dict]

    def frame(self, rng: random.Random, correlation_id: int) -> bytes:
        """A valid, size-prefixed request frame."""
        return encode_request(self.api_key, self.version, correlation_id, self.body(rng), client_id=CLIENT_ID)

    @property
    def name(self) -> str:
        return f"{self.api_key.name} v{self.version}"


def _topic(rng: random.Random) -> tuple[str, int]:
    name = rng.choice(sorted(FUZZ_TOPICS))
    return name, rng.randrange(FUZZ_TOPICS[name])


def _uuid(rng: random.Random) -> uuid.UUID:
    """A topic id: mostly one no topic has (the fuzzer's topics' ids are not known here)."""
    return rng.choice((uuid.UUID(int=rng.getrandbits(128)), uuid.UUID(int=0)))


def _acks(rng: random.Random) -> list[dict]:
    first = rng.choice((0, 1, 5))
    return rng.choice(([], [{"first_offset": first, "last_offset": first + rng.choice((0, 2, -1)),
                             "acknowledge_types": rng.choice(([1], [0], [2, 3], [9]))}]))


def _share_fetch(rng: random.Random) -> dict:
    return {"group_id": FUZZ_SHARE_GROUP, "member_id": rng.choice(("fuzz-share-member", "", None)),
            "share_session_epoch": rng.choice((0, 1, -1, 7)), "max_wait_ms": rng.choice((0, 10)), "min_bytes": 1,
            "max_bytes": 1 << 16, "max_records": rng.choice((1, 500)), "batch_size": rng.choice((1, 500)),
            "share_acquire_mode": rng.choice((0, 1, 5)), "is_renew_ack": rng.random() < 0.2,
            "topics": [{"topic_id": _uuid(rng), "partitions": [
                {"partition_index": rng.choice((0, 1, 7)), "acknowledgement_batches": _acks(rng)}]}],
            "forgotten_topics_data": rng.choice(([], [{"topic_id": _uuid(rng), "partitions": [0]}]))}


def _share_acknowledge(rng: random.Random) -> dict:
    return {"group_id": FUZZ_SHARE_GROUP, "member_id": rng.choice(("fuzz-share-member", "", None)),
            "share_session_epoch": rng.choice((0, 1, -1, 7)), "is_renew_ack": rng.random() < 0.2,
            "topics": [{"topic_id": _uuid(rng), "partitions": [
                {"partition_index": rng.choice((0, 1, 7)), "acknowledgement_batches": _acks(rng)}]}]}


def _share_state(rng: random.Random, **partition: object) -> dict:
    """A share coordinator state request for the fuzzer's own share group, on a topic no one has."""
    return {"group_id": rng.choice((FUZZ_SHARE_GROUP, "")), "topics": [
        {"topic_id": _uuid(rng), "partitions": [{"partition": rng.choice((0, 1, -1)), **partition}]}]}


def _produce(rng: random.Random) -> dict:
    topic, partition = _topic(rng)
    return {"transactional_id": None, "acks": rng.choice((-1, 1, 1, 0)), "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": valid_batch(rng).encode()}]}]}


def _fetch(rng: random.Random) -> dict:
    topic, partition = _topic(rng)
    return {"replica_id": -1, "max_wait_ms": rng.choice((0, 10)), "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": rng.choice((0, 1)), "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "current_leader_epoch": -1, "fetch_offset": rng.choice((0, 1, 5)),
                 "log_start_offset": -1, "partition_max_bytes": 1 << 16}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def _list_offsets(rng: random.Random) -> dict:
    topic, partition = _topic(rng)
    return {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "current_leader_epoch": -1,
         "timestamp": rng.choice((-1, -2, 0, -3, -6, -7))}]}]}  # special ones refused below their version


def _metadata(rng: random.Random) -> dict:
    topics = rng.choice(([], [{"name": n} for n in FUZZ_TOPICS]))  # v0: [] means all topics
    return {"topics": topics, "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}


def _member(rng: random.Random) -> str:
    return rng.choice(("", "fuzzer-member"))


def _offset_commit(rng: random.Random) -> dict:
    topic, partition = _topic(rng)
    return {"group_id": FUZZ_GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": topic, "topic_id": _topic_id(rng), "partitions": [
                {"partition_index": partition, "committed_offset": rng.randrange(10),
                 "committed_leader_epoch": -1, "committed_metadata": "fuzz"}]}]}


def _topic_id(rng: random.Random) -> uuid.UUID:
    """v10+ name topics by id: the fuzzer knows none of its topics' ids (an unknown one, or zero)."""
    return uuid.UUID(int=rng.choice((0, rng.getrandbits(128))))


def _offset_fetch(rng: random.Random) -> dict:
    topic, partition = _topic(rng)
    topics = [{"name": topic, "partition_indexes": [partition]}]
    # v8+: a batch of groups, v9+ with a member (an unknown one) or none, v10+ by topic id.
    return {"group_id": FUZZ_GROUP, "topics": topics, "require_stable": rng.random() < 0.5, "groups": [
        {"group_id": FUZZ_GROUP, "member_id": rng.choice((None, _member(rng))), "member_epoch": rng.choice((-1, 1)),
         "topics": rng.choice((None, [{**topics[0], "topic_id": _topic_id(rng)}]))}]}


def _join(rng: random.Random) -> dict:
    return {"group_id": FUZZ_GROUP, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
            "member_id": _member(rng), "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x01\x00\x06fuzz-a\xff\xff\xff\xff"}]}


def _heartbeat(rng: random.Random) -> dict:
    return {"group_id": FUZZ_GROUP, "generation_id": rng.choice((-1, 0, 1)), "member_id": _member(rng),
            "group_instance_id": None}


def _leave(rng: random.Random) -> dict:
    member = _member(rng)
    return {"group_id": FUZZ_GROUP, "member_id": member,
            "members": [{"member_id": member, "group_instance_id": None}]}


def _sync(rng: random.Random) -> dict:
    member = _member(rng)
    return {"group_id": FUZZ_GROUP, "generation_id": rng.choice((-1, 1)), "member_id": member,
            "group_instance_id": None, "assignments": [{"member_id": member, "assignment": b"\x00\x01"}]}


def _create_topics(rng: random.Random) -> dict:
    # validate_only mostly; real creations reuse a few names, so they do not pile up.
    return {"topics": [{"name": f"fuzz-made-{rng.randrange(4)}", "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": [{"name": "cleanup.policy", "value": "delete"}]}],
            "timeout_ms": 5000, "validate_only": rng.random() < 0.8}


def _delete_topics(rng: random.Random) -> dict:
    name = f"fuzz-made-{rng.randrange(4)}"
    # v6 names a topic or gives an id (here one nobody has: UNKNOWN_TOPIC_ID), or both (INVALID_REQUEST).
    unknown = uuid.UUID(int=rng.getrandbits(128) | 1)  # from the seed, never the zero id
    state = rng.choice(({"name": name, "topic_id": uuid.UUID(int=0)}, {"name": None, "topic_id": unknown},
                        {"name": name, "topic_id": unknown}))
    return {"topic_names": [name], "topics": [state], "timeout_ms": 5000}


def _create_partitions(rng: random.Random) -> dict:
    return {"topics": [{"name": "fuzz-b", "count": 2, "assignments": None}], "timeout_ms": 5000,
            "validate_only": True}


def _describe_configs(rng: random.Random) -> dict:
    return {"resources": [{"resource_type": rng.choice((2, 4)),
                           "resource_name": rng.choice(("fuzz-a", "1")), "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}


def _leader_epoch(rng: random.Random) -> dict:
    topic, partition = _topic(rng)
    return {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
        {"partition": partition, "current_leader_epoch": -1, "leader_epoch": 0}]}]}


def _acl_filter(rng: random.Random, suffix: str) -> dict:
    return {f"resource_type{suffix}": rng.choice((1, 2)), f"resource_name{suffix}": rng.choice((None, "fuzz-a")),
            f"pattern_type{suffix}": rng.choice((1, 3)), f"principal{suffix}": "User:fuzz",
            f"host{suffix}": None, "operation": 1, "permission_type": 1}
def _alter_configs(rng: random.Random) -> dict:
    # validate_only: the fuzz run must not change the topics' configs under the other APIs
    return {"resources": [{"resource_type": rng.choice((2, 4)), "resource_name": rng.choice(("fuzz-a", "1")),
                           "configs": [{"name": "retention.ms", "value": str(rng.randrange(1, 10**9)),
                                        "config_operation": rng.randrange(4)}]}],
            "validate_only": True}


def _offset_delete(rng: random.Random) -> dict:
    topic, partition = _topic(rng)
    return {"group_id": "fuzz-other-group", "topics": [{"name": topic, "partitions": [
        {"partition_index": partition}]}]}


BODIES: dict[ApiKey, Callable[[random.Random], dict]] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: lambda rng: {"key": FUZZ_GROUP, "key_type": 0,
                                         "coordinator_keys": [FUZZ_GROUP, rng.choice(("", "fuzz-txn"))]},
    ApiKey.JOIN_GROUP: _join,
    ApiKey.HEARTBEAT: _heartbeat,
    ApiKey.LEAVE_GROUP: _leave,
    ApiKey.SYNC_GROUP: _sync,
    ApiKey.DESCRIBE_GROUPS: lambda rng: {"groups": [FUZZ_GROUP], "include_authorized_operations": False},
    # v5: no target, another cluster's (REBOOTSTRAP_REQUIRED) or half a target (INVALID_REQUEST).
    ApiKey.API_VERSIONS: lambda rng: {"client_software_name": "fuzzer", "client_software_version": "1",
                                      **dict(zip(("cluster_id", "node_id"),
                                                 rng.choice(((None, -1), ("fuzz-cluster", 1), ("fuzz", -1))), strict=True))},
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.INIT_PRODUCER_ID: lambda rng: {"transactional_id": None, "transaction_timeout_ms": 60000},
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _leader_epoch,
    ApiKey.DESCRIBE_CONFIGS: _describe_configs,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DELETE_GROUPS: lambda rng: {"groups_names": ["fuzz-other-group"]},
    ApiKey.ALTER_CONFIGS: lambda rng: {**_alter_configs(rng), "resources": [
        {**r, "configs": [{"name": c["name"], "value": c["value"]} for c in r["configs"]]}
        for r in _alter_configs(rng)["resources"]]},
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _alter_configs,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.DESCRIBE_LOG_DIRS: lambda rng: {"topics": rng.choice((None, [{"topic": "fuzz-a", "partitions": [0]}]))},
    ApiKey.DELETE_RECORDS: lambda rng: {"timeout_ms": 1000, "topics": [{"name": "fuzz-made-0", "partitions": [
        {"partition_index": 0, "offset": rng.choice((-1, 0, 10**12))}]}]},
    ApiKey.ELECT_LEADERS: lambda rng: {"election_type": 0, "timeout_ms": 5000, "topic_partitions": [
        {"topic": "fuzz-a", "partitions": [0]}]},
    ApiKey.DESCRIBE_CLUSTER: lambda rng: {"include_cluster_authorized_operations": rng.random() < 0.5,
                                          "endpoint_type": 1},
    ApiKey.LIST_GROUPS: lambda rng: {"states_filter": rng.choice(([], ["Empty"], ["stable", "Dead"])),
                                     "types_filter": rng.choice(([], ["classic"], ["consumer"]))},
    ApiKey.DESCRIBE_QUORUM: lambda rng: {"topics": [{"topic_name": "__cluster_metadata",
                                                    "partitions": [{"partition_index": 0}]}]},
    ApiKey.DESCRIBE_ACLS: lambda rng: _acl_filter(rng, "_filter"),
    ApiKey.CREATE_ACLS: lambda rng: {"creations": [{
        "resource_type": 2, "resource_name": "fuzz-a", "resource_pattern_type": rng.choice((3, 4)),
        "principal": "User:fuzz", "host": "*", "operation": rng.choice((3, 4, 8)), "permission_type": 3}]},
    ApiKey.DELETE_ACLS: lambda rng: {"filters": [_acl_filter(rng, "_filter")]},
    ApiKey.SASL_HANDSHAKE: lambda rng: {"mechanism": rng.choice(["PLAIN", "SCRAM-SHA-256", "GSSAPI"])},
    ApiKey.SASL_AUTHENTICATE: lambda rng: {"auth_bytes": b"\0fuzz\0fuzz"},
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: lambda rng: {"users": [{"name": "fuzz-user"}]},
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: lambda rng: {"deletions": [{"name": "fuzz-user", "mechanism": 1}],
                                                      "upsertions": []},
    # Harmless as sent: a missing topic's move, a cancel with nothing moving, an unknown broker.
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: lambda rng: {
        "timeout_ms": 5000, "allow_replication_factor_change": True, "topics": [
            {"name": rng.choice(("fuzz-missing", "fuzz-a")), "partitions": [
                {"partition_index": rng.randrange(3), "replicas": rng.choice((None, [4242]))}]}]},
    ApiKey.LIST_PARTITION_REASSIGNMENTS: lambda rng: {
        "timeout_ms": 5000, "topics": rng.choice((None, [{"name": "fuzz-a", "partition_indexes": [0, 1]}]))},
    ApiKey.UNREGISTER_BROKER: lambda rng: {"broker_id": 4242},
    # Named or all topics, a small page, from a cursor (one the named list lacks: INVALID_REQUEST).
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: lambda rng: {
        "topics": rng.choice(([], [{"name": "fuzz-a"}, {"name": "fuzz-missing"}])),
        "response_partition_limit": rng.choice((1, 2, 2000)),
        "cursor": rng.choice((None, {"topic_name": "fuzz-a", "partition_index": rng.randrange(3)},
                              {"topic_name": "fuzz-b", "partition_index": 0}))},
    # v1: a known, an unsupported (UNSUPPORTED_VERSION) or no type (all of them); v0 has no field.
    ApiKey.LIST_CONFIG_RESOURCES: lambda rng: {
        "resource_types": rng.choice(([], [16], [2, 4, 8], [16, 32], [3]))},
    # Transactions: ids and producers nobody uses (answers 49/16/105), never a real one.
    ApiKey.ADD_PARTITIONS_TO_TXN: lambda rng: {
        "v3_and_below_transactional_id": "fuzz-txn", "v3_and_below_producer_id": rng.choice((-1, 4242)),
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": rng.choice(("fuzz-a", "fuzz-missing")), "partitions": [0]}]},
    ApiKey.ADD_OFFSETS_TO_TXN: lambda rng: {"transactional_id": "fuzz-txn", "producer_id": 4242,
                                            "producer_epoch": 0, "group_id": FUZZ_GROUP},
    ApiKey.END_TXN: lambda rng: {"transactional_id": "fuzz-txn", "producer_id": 4242, "producer_epoch": 0,
                                 "committed": rng.random() < 0.5},
    ApiKey.DESCRIBE_TRANSACTIONS: lambda rng: {"transactional_ids": ["fuzz-txn", ""]},
    ApiKey.LIST_TRANSACTIONS: lambda rng: {"state_filters": rng.choice(([], ["Ongoing", "bogus"])),
                                           "producer_id_filters": [], "duration_filter": rng.choice((-1, 0)),
                                           "transactional_id_pattern": rng.choice((None, "", "fuzz-.*", "(?=x)", "["))},
    # A marker for a producer nobody uses, on a topic that does not exist.
    ApiKey.WRITE_TXN_MARKERS: lambda rng: {"markers": [{
        "producer_id": 4242, "producer_epoch": 0, "transaction_result": rng.random() < 0.5,
        "topics": [{"name": "fuzz-missing", "partition_indexes": [0]}], "coordinator_epoch": 0}]},
    ApiKey.TXN_OFFSET_COMMIT: lambda rng: {
        "transactional_id": "fuzz-txn", "group_id": FUZZ_GROUP, "producer_id": 4242, "producer_epoch": 0,
        "generation_id": -1, "member_id": "", "group_instance_id": None,
        # A missing topic: refused per partition, so no pending offset (no open transaction) is left.
        "topics": [{"name": "fuzz-missing", "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                      "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
    ApiKey.DESCRIBE_PRODUCERS: lambda rng: {"topics": [{"name": "fuzz-a", "partition_indexes": [0]}]},
    # KIP-848: a member of the fuzzer's own consumer group joins, heartbeats or leaves.
    ApiKey.CONSUMER_GROUP_HEARTBEAT: lambda rng: {
        "group_id": "fuzz-consumer-group", "member_id": "fuzz-member", "member_epoch": rng.choice((0, 1, -1, 7)),
        "instance_id": None, "rack_id": None, "rebalance_timeout_ms": rng.choice((-1, 30000)),
        "subscribed_topic_names": rng.choice((None, ["fuzz-a"], [])),
        "subscribed_topic_regex": rng.choice((None, "", "fuzz-.*", "(?=bad)")),
        "server_assignor": rng.choice((None, "uniform", "bogus")), "topic_partitions": rng.choice((None, []))},
    ApiKey.CONSUMER_GROUP_DESCRIBE: lambda rng: {
        "group_ids": ["fuzz-consumer-group", FUZZ_GROUP, ""], "include_authorized_operations": rng.random() < 0.5},
    # Client quotas: a describe of any match type, and an alter that only validates (never a real quota).
    ApiKey.DESCRIBE_CLIENT_QUOTAS: lambda rng: {
        "components": [{"entity_type": rng.choice(("user", "client-id", "ip", "bogus")),
                        "match_type": rng.choice((0, 1, 2, 7)), "match": rng.choice((None, "fuzz"))}],
        "strict": rng.random() < 0.5},
    ApiKey.ALTER_CLIENT_QUOTAS: lambda rng: {
        "entries": [{"entity": [{"entity_type": rng.choice(("user", "client-id", "bogus")), "entity_name": "fuzz"}],
                     "ops": [{"key": rng.choice(("producer_byte_rate", "bogus")), "value": rng.choice((1024.0, -1.0)),
                              "remove": rng.random() < 0.3}]}],
        "validate_only": True},
    # Share groups (KIP-932): the fuzzer's own share group joins, fetches and acknowledges on a
    # topic id no topic has, and the share coordinator's state APIs on one.
    ApiKey.SHARE_GROUP_HEARTBEAT: lambda rng: {
        "group_id": FUZZ_SHARE_GROUP, "member_id": rng.choice(("fuzz-share-member", "")),
        "member_epoch": rng.choice((0, 1, -1, 7)), "rack_id": None,
        "subscribed_topic_names": rng.choice((None, ["fuzz-a"], []))},
    ApiKey.SHARE_GROUP_DESCRIBE: lambda rng: {
        "group_ids": [FUZZ_SHARE_GROUP, FUZZ_GROUP, ""], "include_authorized_operations": rng.random() < 0.5},
    ApiKey.SHARE_FETCH: _share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: _share_acknowledge,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: lambda rng: {"groups": [
        {"group_id": rng.choice((FUZZ_SHARE_GROUP, FUZZ_GROUP, "")),
         "topics": rng.choice((None, [{"topic_name": "fuzz-a", "partitions": [0, 7]}]))}]},
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: lambda rng: {"group_id": FUZZ_SHARE_GROUP, "topics": [
        {"topic_name": rng.choice(("fuzz-a", "fuzz-missing")), "partitions": [
            {"partition_index": rng.choice((0, 7)), "start_offset": rng.choice((0, -1, 1 << 40))}]}]},
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: lambda rng: {"group_id": FUZZ_SHARE_GROUP, "topics": [
        {"topic_name": rng.choice(("fuzz-a", "fuzz-missing"))}]},
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: lambda rng: _share_state(
        rng, state_epoch=rng.choice((0, 1, -1)), start_offset=rng.choice((0, -1, 5))),
    ApiKey.READ_SHARE_GROUP_STATE: lambda rng: _share_state(rng, leader_epoch=rng.choice((0, -1))),
    ApiKey.WRITE_SHARE_GROUP_STATE: lambda rng: _share_state(
        rng, state_epoch=rng.choice((0, 1)), leader_epoch=rng.choice((0, -1)), start_offset=rng.choice((0, 5, -1)),
        delivery_complete_count=rng.choice((0, -1, 3)),
        state_batches=[{"first_offset": 0, "last_offset": rng.choice((0, 3, -1)),
                        "delivery_state": rng.choice((0, 2, 4, 9)), "delivery_count": rng.choice((1, 0, -1))}]),
    ApiKey.DELETE_SHARE_GROUP_STATE: lambda rng: _share_state(rng),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: lambda rng: _share_state(rng, leader_epoch=rng.choice((0, -1))),
}


def corpus() -> list[Entry]:
    """One entry per (API, version): every advertised version, and ApiVersions up to its
    declared maximum."""
    entries = []
    for key, body in BODIES.items():
        low, high = ADVERTISED_VERSIONS[key]
        if key == ApiKey.API_VERSIONS:
            high = DECLARED_VERSIONS[key][1]
        entries.extend(Entry(key, version, body) for version in range(low, high + 1))
    return entries
