"""Steps that send one request at a chosen version to both clusters, on a real socket, with
raftka's codec (tests/compat/wire_client.py), for the newest versions no CLI tool exercises alone:
what each answers is printed as error names and the fields that matter, not the wording.

Each step is a short Python program (tool "python", tests/differential/tools.py) that gets the
bootstrap address as argv[1].
"""

from __future__ import annotations

from pathlib import Path

from tests.differential.client_steps import python
from tests.differential.steps import B, Scenario, Step

_REPO = str(Path(__file__).resolve().parents[2])

_WIRE = f"import sys\nsys.path.insert(0, {_REPO!r})\n" + """\
import time
from raftka.client.protocol import ApiKey, error_info
from tests.compat.wire_client import WireConnection
conn = WireConnection(sys.argv[1], client_id="differential")
def name(code):
    return error_info(code).name
def coordinator_ready(group):
    # Found and loaded: FindCoordinator answers, and so does DescribeGroups (not 14/15/16).
    deadline = time.monotonic() + 60
    while (conn.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0}).error_code
           or conn.request(ApiKey.DESCRIBE_GROUPS, 0, {"groups": [group]}).groups[0].error_code in (14, 15, 16)):
        assert time.monotonic() < deadline, "no group coordinator within 60 s"
        time.sleep(0.2)  # polling under the deadline above
"""

WIRE = Scenario("wire-versions", steps=(
    python("wire.metadata-v13-and-api-versions-v5", _WIRE, """\
md = conn.request(ApiKey.METADATA, 13, {"topics": []})
print("metadata v13", name(md.error_code), "brokers", len(md.brokers))
cluster, node = md.cluster_id, md.brokers[0].node_id
for label, cid, nid in (("neither", None, -1), ("own", cluster, node),
                        ("other-cluster", "not-" + cluster, node), ("other-node", cluster, node + 1),
                        ("empty-cluster", "", node), ("cluster-only", cluster, -1), ("node-only", None, node)):
    r = conn.request(ApiKey.API_VERSIONS, 5, {"client_software_name": "differential",
                     "client_software_version": "1", "cluster_id": cid, "node_id": nid})
    print("api-versions v5", label, name(r.error_code), "api_keys" if r.api_keys else "no api_keys")
# The connection stays open after REBOOTSTRAP_REQUIRED.
print("after", name(conn.request(ApiKey.METADATA, 13, {"topics": []}).error_code))
"""),
    python("wire.create-topics-v7", _WIRE, """\
import uuid
def topic(name, **fields):
    return {"name": name, "num_partitions": -1, "replication_factor": -1, "assignments": [], "configs": [], **fields}
for validate_only in (True, False):
    answer = conn.request(ApiKey.CREATE_TOPICS, 7, {"timeout_ms": 15000, "validate_only": validate_only, "topics": [
        topic("dw-ct", num_partitions=2, configs=[{"name": "retention.ms", "value": "1000"},
                                                  {"name": "cleanup.policy", "value": "compact"}]),
        topic("dw-ct-assigned", assignments=[{"partition_index": 0, "broker_ids": [1]}]),
        topic("dw-ct-bad", configs=[{"name": "retention.ms", "value": "abc"}]),
        topic("dw-ct-rf", replication_factor=3)]})
    print("validate_only", validate_only)
    for t in answer.topics:
        print(" ", t.name, name(t.error_code), "config error", name(t.topic_config_error_code),
              "layout", t.num_partitions, t.replication_factor, "id", "zero" if t.topic_id == uuid.UUID(int=0) else "set",
              "configs", len(t.configs))
        for c in sorted(t.configs, key=lambda c: c.name):
            if c.config_source != 5 or c.read_only or c.is_sensitive:  # all but plain defaults
                print("   ", c.name, c.value, "source", c.config_source, c.read_only, c.is_sensitive)
deadline = time.monotonic() + 30
while True:  # the broker's metadata may be a moment behind the create
    [md] = conn.request(ApiKey.METADATA, 12, {"topics": [{"name": "dw-ct"}], "allow_auto_topic_creation": False}).topics
    if md.topic_id != uuid.UUID(int=0) or time.monotonic() > deadline:
        break
    time.sleep(0.1)  # polling under the deadline above
print("the id is Metadata's", md.topic_id == answer.topics[0].topic_id)
"""),
    python("wire.create-topics-duplicate-name", _WIRE, """\
def topic(name):
    return {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
for version in (2, 7):
    answer = conn.request(ApiKey.CREATE_TOPICS, version, {"timeout_ms": 15000, "validate_only": False, "topics": [
        topic(f"dw-dup-{version}"), topic(f"dw-dup-ok-{version}"), topic(f"dw-dup-{version}")]})
    print("v%d" % version, len(answer.topics), "results")
    for t in sorted(answer.topics, key=lambda t: t.name):
        print(" ", t.name, name(t.error_code), t.error_message)
    md = conn.request(ApiKey.METADATA, 12, {"topics": [{"name": f"dw-dup-{version}"}],
                                            "allow_auto_topic_creation": False})
    print("  the duplicated name exists:", name(md.topics[0].error_code))
"""),
    python("wire.delete-topics-v5-v6", _WIRE, """\
import uuid
zero = uuid.UUID(int=0)
for topic in ("dw-dt5", "dw-dt6-id", "dw-dt6-name"):
    print("create", topic, name(conn.create_topic(topic)))
def topic_ids():
    return {t.name: t.topic_id for t in conn.request(ApiKey.METADATA, 12, {"topics": [
        {"name": "dw-dt6-id"}, {"name": "dw-dt6-name"}], "allow_auto_topic_creation": False}).topics}
deadline = time.monotonic() + 30
while zero in (ids := topic_ids()).values():  # the broker's metadata may be a moment behind the create
    assert time.monotonic() < deadline, "the new topics never showed in Metadata"
    time.sleep(0.1)  # polling under the deadline above
def show(answer):
    for r in sorted(answer.responses, key=lambda r: (r.name or "", str(r.topic_id))):  # Kafka's order is a hash's
        shown_id = "zero" if r.topic_id == zero else "the topic's id" if r.topic_id in ids.values() else "other"
        print("  ", repr(r.name), shown_id, name(r.error_code), repr(r.error_message))
print("v5")
show(conn.request(ApiKey.DELETE_TOPICS, 5, {"topic_names": ["dw-dt5", "dw-dt-missing", "bad name!", ""],
                                            "timeout_ms": 15000}))
print("v6")
show(conn.request(ApiKey.DELETE_TOPICS, 6, {"timeout_ms": 15000, "topics": [
    {"name": None, "topic_id": ids["dw-dt6-id"]}, {"name": "dw-dt6-name", "topic_id": zero},
    {"name": None, "topic_id": uuid.UUID(int=5)}, {"name": "dw-dt-x", "topic_id": uuid.UUID(int=7)},
    {"name": None, "topic_id": zero}, {"name": "dw-dt-missing", "topic_id": zero}]}))
"""),
    # ListTransactions v2 (KIP-1152) through Kafka's own tool, on transactions librdkafka began.
    python("wire.transactions-begin", "", """\
import sys
from confluent_kafka import Producer
for transactional_id in ("dw-tx-1", "dw-tx-22", "dw-other"):
    # log_level 3: no warnings, whose retries ("coordinator loading") are a matter of timing
    producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": transactional_id, "log_level": 3})
    producer.init_transactions(30)
    print("initialized", transactional_id)
"""),
    Step("wire.transactions-list-pattern", "kafka-transactions",
         (*B, "list", "--transactional-id-pattern", "dw-tx-.*")),
    Step("wire.transactions-list-bad-pattern", "kafka-transactions",
         (*B, "list", "--transactional-id-pattern", "(?=dw)"), kafka_exit=1),
    python("wire.list-transactions-v2", _WIRE, """\
for pattern in (None, "", "dw-tx-.*", "dw-tx", "dw-tx-\\d", ".*22", "\\Qdw-tx-1\\E", "(?i)DW-TX-1",
                "(?=x)", "a{2}+", "["):
    answer = conn.request(ApiKey.LIST_TRANSACTIONS, 2, {"state_filters": ["bogus", "Empty"], "producer_id_filters": [],
                                                         "duration_filter": -1, "transactional_id_pattern": pattern})
    ids = sorted(t.transactional_id for t in answer.transaction_states if t.transactional_id.startswith("dw-"))
    print(repr(pattern), name(answer.error_code), ids, answer.unknown_state_filters)
# A state filter of unknown states only matches nothing (it is not "no filter").
answer = conn.request(ApiKey.LIST_TRANSACTIONS, 2, {"state_filters": ["bogus"], "producer_id_filters": [],
                                                     "duration_filter": -1, "transactional_id_pattern": None})
print("unknown states only", name(answer.error_code), len(answer.transaction_states), answer.unknown_state_filters)
"""),
    python("wire.list-offsets-v11", _WIRE, """\
from raftka.log.record_batch import Record, encode_batch
print("create", name(conn.create_topic("dw-lo")))
batch = encode_batch([Record(key=None, value=b"v%d" % i, timestamp=ts) for i, ts in enumerate((1000, 5000, 3000))])
deadline = time.monotonic() + 30
while True:  # until this broker leads the new partition
    answer = conn.produce("dw-lo", 0, batch)
    if answer.error_code == 0 or time.monotonic() > deadline:
        break
    time.sleep(0.1)  # polling under the deadline above
print("produce", name(answer.error_code))
for version in (1, 6, 7, 8, 9, 10, 11):
    row = []
    for timestamp in (-1, -2, -3, -4, -5, -6, -7):
        [topic] = conn.request(ApiKey.LIST_OFFSETS, version, {
            "replica_id": -1, "isolation_level": 0, "timeout_ms": 1000, "topics": [{"name": "dw-lo", "partitions": [
                {"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": -1}]}]}).topics
        p = topic.partitions[0]
        row.append(f"{timestamp}:{name(p.error_code)}/{p.offset}/{p.timestamp}/{p.leader_epoch}")
    print("v", version, " ".join(row))
"""),
    # Without an authorizer (as both clusters run here) every version answers SECURITY_DISABLED;
    # the USER resource type with one is checked in tests/integration/test_newest_request_versions.py.
    python("wire.acls-v3", _WIRE, """\
creation = {"resource_type": 7, "resource_name": "dw-bob", "resource_pattern_type": 3, "principal": "User:alice",
            "host": "*", "operation": 2, "permission_type": 3}
acl_filter = {"resource_type_filter": 7, "resource_name_filter": "dw-bob", "pattern_type_filter": 3,
              "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
for version in (2, 3):
    created = conn.request(ApiKey.CREATE_ACLS, version, {"creations": [creation]})
    described = conn.request(ApiKey.DESCRIBE_ACLS, version, acl_filter)
    deleted = conn.request(ApiKey.DELETE_ACLS, version, {"filters": [acl_filter]})
    print("v", version, "create", [name(r.error_code) for r in created.results], "describe", name(described.error_code),
          "delete", [name(r.error_code) for r in deleted.filter_results])
"""),
    python("wire.describe-log-dirs-v5", _WIRE, """\
print("create", name(conn.create_topic("dw-ld")))
deadline = time.monotonic() + 30
while True:  # until the new partition's log is open
    answer = conn.request(ApiKey.DESCRIBE_LOG_DIRS, 5, {"topics": [{"topic": "dw-ld", "partitions": [0]}]})
    if any(d.topics for d in answer.results) or time.monotonic() > deadline:
        break
    time.sleep(0.1)  # polling under the deadline above
print(name(answer.error_code))
for d in answer.results:
    print(" ", name(d.error_code), "cordoned", d.is_cordoned, "sizes known", d.total_bytes > 0, d.usable_bytes > 0,
          [(t.name, [(p.partition_index, p.offset_lag, p.is_future_key) for p in t.partitions]) for t in d.topics])
"""),
    # On a PLAINTEXT listener (both clusters here) the connection counts as authenticated.
    python("wire.sasl-authenticate-v2", _WIRE, """\
answer = conn.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\\0user\\0secret"})
print(name(answer.error_code), repr(answer.error_message), answer.auth_bytes, answer.session_lifetime_ms)
print("after", name(conn.request(ApiKey.METADATA, 12, {"topics": []}).error_code))
"""),
    python("wire.delete-groups-v3", _WIRE, """\
print("topic", name(conn.create_topic("dw-dg", 1)))
for group in ("dw-empty", "dw-busy"):
    coordinator_ready(group)
committed = conn.request(ApiKey.OFFSET_COMMIT, 2, {
    "group_id": "dw-empty", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
    "topics": [{"name": "dw-dg", "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                "committed_metadata": ""}]}]})
print("commit", name(committed.topics[0].partitions[0].error_code))
joined = conn.request(ApiKey.JOIN_GROUP, 3, {
    "group_id": "dw-busy", "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000, "member_id": "",
    "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}, timeout=40)
print("join", name(joined.error_code))
answer = conn.request(ApiKey.DELETE_GROUPS, 3, {"groups_names": ["dw-empty", "dw-busy", "dw-none", "",
                                                               "dw-empty"]})
for result in sorted(answer.results, key=lambda r: r.group_id):  # Kafka orders by coordinator partition
    print(repr(result.group_id), name(result.error_code), "message", repr(result.error_message))
"""),
    # A new share group starts at epoch 1 (Kafka's ModernGroup): its first member joins at 2. The
    # topic does not exist, so no share state is initialized (Kafka does that after answering).
    # The last leave moves the target assignment epoch too. One member: a second one joining
    # within share.assignment.interval.ms is assigned later in Kafka, at once in raftka.
    python("wire.share-group-epochs", _WIRE, """\
coordinator_ready("dw-share")
def heartbeat(member, epoch, topics=None):
    r = conn.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {"group_id": "dw-share", "member_id": member,
                     "member_epoch": epoch, "rack_id": None, "subscribed_topic_names": topics})
    print("heartbeat", member, epoch, name(r.error_code), "epoch", r.member_epoch)
def describe():
    g = conn.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": ["dw-share"],
                     "include_authorized_operations": False}).groups[0]
    print("describe", name(g.error_code), g.group_state, g.group_epoch, g.assignment_epoch,
          sorted((m.member_id, m.member_epoch) for m in g.members))
heartbeat("member-a", 0, ["dw-share-none"])
describe()
heartbeat("member-a", 2)
heartbeat("member-a", -1)
describe()
"""),
    # Every group config with its source and synonyms (a key without a broker synonym names
    # itself), an empty group name refused, and a deleted group's configs kept.
    python("wire.describe-configs-group", _WIRE, """\
def describe(group):
    r = conn.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{"resource_type": 32, "resource_name": group,
                     "configuration_keys": None}], "include_synonyms": True, "include_documentation": False})
    for res in r.results:
        print(repr(res.resource_name), name(res.error_code), repr(res.error_message))
        for c in sorted(res.configs, key=lambda c: c.name):
            print(" ", c.name, repr(c.value), c.read_only, c.config_source, c.is_sensitive, c.config_type,
                  [(s.name, s.value, s.source) for s in c.synonyms])
altered = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{"resource_type": 32,
    "resource_name": "dw-cfg", "configs": [{"name": "share.isolation.level", "config_operation": 0,
                                            "value": "read_committed"}]}], "validate_only": False})
print("alter", name(altered.responses[0].error_code))
describe("dw-cfg")
describe("")
print("topic", name(conn.create_topic("dw-cfg-t", 1)))
coordinator_ready("dw-cfg")
print("commit", conn.commit_offsets("dw-cfg", "dw-cfg-t", {0: 1}))
print("delete", name(conn.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["dw-cfg"]}).results[0].error_code))
r = conn.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{"resource_type": 32, "resource_name": "dw-cfg",
                 "configuration_keys": ["share.isolation.level"]}], "include_synonyms": False,
                 "include_documentation": False})
print("after delete", [(c.name, c.value, c.config_source) for c in r.results[0].configs])
"""),
    # include_documentation: whether each config of each resource type has a text when asked
    # (none when not), a broker logger's being "" either way. The texts are each project's own.
    # A broker's configs are asked by name: the dynamic ones other scenarios set on the shared
    # brokers (some without a text on Kafka) would make the answer depend on the run's order.
    python("wire.describe-configs-documentation", _WIRE, """\
print("topic", name(conn.create_topic("dw-doc-t", 1)))
metrics = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{"resource_type": 16,
    "resource_name": "dw-doc-metrics", "configs": [{"name": "interval.ms", "value": "1000", "config_operation": 0}]}],
    "validate_only": False})
print("client metrics", name(metrics.responses[0].error_code))
BROKER_KEYS = ["num.partitions", "log.retention.ms", "message.max.bytes"]
for rtype, rname in ((2, "dw-doc-t"), (4, "1"), (4, ""), (8, "1"), (16, "dw-doc-metrics"), (32, "dw-doc-g")):
    for asked in (True, False):
        res = conn.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{"resource_type": rtype, "resource_name": rname,
                           "configuration_keys": BROKER_KEYS if rtype == 4 else None}], "include_synonyms": False,
                           "include_documentation": asked}).results[0]
        docs = {"null" if c.documentation is None else "empty" if c.documentation == "" else "text"
                for c in res.configs}
        print(rtype, repr(rname), "asked" if asked else "not asked", name(res.error_code), sorted(docs))
"""),
))
