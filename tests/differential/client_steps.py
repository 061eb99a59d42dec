"""Steps that drive both clusters through client libraries rather than Kafka's CLI: librdkafka
(confluent-kafka's AdminClient and Producer) and raftka's own SDK. The Java client is what
Kafka's CLI tools run on.

Each step is a short Python program (tool "python", run by the test's interpreter) that gets the
bootstrap address as argv[1] and prints what it found in a fixed order, and an error as
`error: <Kafka error name>` (not its message), so the comparison sees outcomes, not wording.
"""

from __future__ import annotations

from pathlib import Path

from tests.differential.kafka_jars import TOOLS_LOG4J, cache_dir, java_binary
from tests.differential.steps import B, Scenario, Step, groups, produce, topics

# Wire-level cases written once for both brokers (tests/compat holds raftka to Kafka's answers).
_WIRE = f"""\
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
"""

_CK = """\
import sys
import time
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, ConfigResource, ConfigSource, OffsetSpec,
    ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion)
admin = AdminClient({"bootstrap.servers": sys.argv[1]})
LOADING = ("NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE")
def wait(future):
    try:
        return future.result(timeout=30)
    except KafkaException as exc:
        print("error:", exc.args[0].name())
        sys.exit(0)
"""

_SDK = """\
import sys
from raftka.client.blocking import Admin
admin = Admin(sys.argv[1])
"""


def python(step_id: str, prelude: str, body: str) -> Step:
    return Step(step_id, "python", (prelude + body, "{bootstrap}"))


# Kafka 4.4's own Java producer running transactions (tests/integration/java/TxnV2Producer.java):
# at transaction.version 2 on both clusters. Compiled per target (the two run at once), then
# read back with librdkafka: the committed values per partition under read_committed, and the
# group offset the transactions sent. The last transaction aborts; the one before it had to
# complete before the last could add its partitions, so everything printed is settled.
_JAVA_TXN = f"""\
import subprocess, sys, tempfile
from confluent_kafka import Consumer, TopicPartition
libs = {str(cache_dir() / "libs")!r} + "/*"
with tempfile.TemporaryDirectory() as classes:
    subprocess.run(["javac", "-nowarn", "-cp", libs, "-d", classes,
                    {str(Path(__file__).resolve().parents[1] / "integration" / "java" / "TxnV2Producer.java")!r}],
                   check=True, capture_output=True)
    run = subprocess.run([{java_binary()!r}, "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                          "-Dlog4j2.configurationFile={TOOLS_LOG4J}", "-cp", classes + ":" + libs,
                          "TxnV2Producer", sys.argv[1], "dl-txn", "dl-txn-id", "dl-txn-group", "6"],
                         capture_output=True, text=True)
print(run.stdout.strip())
if run.returncode:
    print("error: producer exit", run.returncode)
    sys.exit(0)
consumer = Consumer({{"bootstrap.servers": sys.argv[1], "group.id": "dl-txn-group",
                     "isolation.level": "read_committed", "enable.partition.eof": True,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"}})
consumer.assign([TopicPartition("dl-txn", p, 0) for p in (0, 1)])
values, ended = {{0: [], 1: []}}, set()
while len(ended) < 2:
    message = consumer.poll(30)
    if message is None:
        print("error: no message in 30 s")
        break
    if message.error():
        ended.add(message.partition())
        continue
    values[message.partition()].append(message.value().decode())
for p in (0, 1):
    print("partition", p, " ".join(values[p]))
(tp,) = consumer.committed([TopicPartition("dl-txn", 0)], timeout=30)
print("group offset", tp.offset)
consumer.close()
"""


CLIENTS = Scenario("clients", steps=(
    topics("clients.create-topic", "--create", "--topic", "dl-t", "--partitions", "1", "--config",
           "max.message.bytes=2000000"),
    produce("clients.produce", "dl-t", ["k0:v0"]),
    python("clients.ck-describe-cluster", _CK, """\
d = wait(admin.describe_cluster())
print("controller", d.controller.id, "nodes", sorted(n.id for n in d.nodes))
"""),
    python("clients.ck-topic-config-synonyms", _CK, """\
(future,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "dl-t")]).values()
entry = wait(future)["max.message.bytes"]
print(entry.name, entry.value, ConfigSource(entry.source).name)
for synonym in entry.synonyms.values():
    print("  synonym", synonym.name, synonym.value, ConfigSource(synonym.source).name)
"""),
    python("clients.ck-list-offsets-max-timestamp", _CK, """\
for tp, future in admin.list_offsets({TopicPartition("dl-t", 0): OffsetSpec.max_timestamp()}).items():
    print(tp.topic, tp.partition, wait(future).offset)
"""),
    python("clients.ck-describe-missing-group", _CK, """\
deadline = time.monotonic() + 30
while True:  # until the group coordinator has loaded (a fresh cluster's first group request)
    (future,) = admin.describe_consumer_groups(["dl-missing"]).values()
    try:
        print("dl-missing", future.result(timeout=30).state.name)
        break
    except KafkaException as exc:
        if exc.args[0].name() not in LOADING or time.monotonic() > deadline:
            print("error:", exc.args[0].name())
            break
    time.sleep(0.2)  # polling the coordinator under the deadline above
"""),
    python("clients.ck-alter-scram", _CK, """\
try:
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "dl-bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret")])
except KafkaException as exc:
    print("error:", exc.args[0].name())
    sys.exit(0)
for user, future in futures.items():
    wait(future)
    print(user, "upserted")
"""),
    python("clients.ck-idempotent-produce", _CK, """\
producer = Producer({"bootstrap.servers": sys.argv[1], "enable.idempotence": True})
delivered = []
for i in range(3):
    producer.produce("dl-t", key=b"k%d" % i, value=b"v%d" % i,
                     on_delivery=lambda err, msg: delivered.append((err and err.name(), msg.partition(), msg.offset())))
producer.flush(30)
print(delivered)
"""),
    python("clients.sdk-describe-cluster", _SDK, """\
with admin:
    d = admin.describe_cluster()
    print("controller", d.controller_id, "brokers", sorted(b.node_id for b in d.brokers))
"""),
    python("clients.sdk-describe-topic", _SDK, """\
with admin:
    (t,) = admin.describe_topics(["dl-t"])
    for p in t.partitions:
        print(t.name, p.partition, "leader", p.leader, "replicas", p.replicas, "isr", p.isr)
"""),
    python("clients.sdk-topic-config", _SDK, """\
with admin:
    entry = admin.describe_configs("dl-t", keys=["max.message.bytes"])["max.message.bytes"]
    print(entry.name, entry.value, "source", entry.source, "default", entry.is_default)
"""),
    Step("clients.get-offsets-after-produce", "kafka-get-offsets", (*B, "--topic", "dl-t")),
    topics("clients.create-txn-topic", "--create", "--topic", "dl-txn", "--partitions", "2"),
    Step("clients.java-transactions", "python", (_JAVA_TXN, "{bootstrap}")),
    python("clients.wire-offset-commit-fetch-versions", _WIRE, """\
from tests.compat.offset_api_cases import lines
print("\\n".join(lines(sys.argv[1])))
"""),
))

# A consumer-protocol (KIP-848) group as Kafka's kafka-consumer-groups shows it: one member joins
# over the wire (ConsumerGroupHeartbeat v1, its own member id) and acknowledges its assignment,
# then stays in the group for its session (45 s) while the tool describes it. Then two groups of
# their own, over the wire: their records, and a revocation while the target moves.
KIP848_GROUPS = Scenario("kip848-groups", steps=(
    topics("kip848.create-topic", "--create", "--topic", "dm-t", "--partitions", "2"),
    python("kip848.member-joins", _WIRE, """\
from tests.compat.offset_api_cases import join_and_acknowledge
print(join_and_acknowledge(sys.argv[1], "dm-group", "dm-t", "dm-member-0000000000000"))
"""),
    groups("kip848.describe", "--describe", "--group", "dm-group"),
    groups("kip848.describe-members", "--describe", "--group", "dm-group", "--members"),
    groups("kip848.describe-members-verbose", "--describe", "--group", "dm-group", "--members", "--verbose"),
    groups("kip848.describe-state", "--describe", "--group", "dm-group", "--state"),
    groups("kip848.list", "--list", "--type", unordered=True),
    # The records a member's join and leave leave in __consumer_offsets (tests/compat/kip848_cases.py):
    # the metadata hash in the group epoch record, no ConsumerGroupPartitionMetadata record, the
    # target assignment epoch following the group epoch when the group empties.
    topics("kip848.create-records-topic", "--create", "--topic", "dr-t", "--partitions", "2"),
    python("kip848.group-records", _WIRE, """\
from tests.compat.kip848_cases import group_records
print(group_records(sys.argv[1], "dr-group", "dr-t", "dr-member-0000000000000"))
"""),
    # A member's epoch while it revokes and the target moves again (Kafka's CurrentAssignmentBuilder).
    topics("kip848.create-six-partitions", "--create", "--topic", "dr-six", "--partitions", "6"),
    python("kip848.revoke-while-target-moves", _WIRE, """\
from tests.compat.kip848_cases import revoke_while_target_moves
print(revoke_while_target_moves(sys.argv[1], "dr-moves", "dr-six",
                                ("dr-a-000000000000000000", "dr-b-000000000000000000", "dr-c-000000000000000000")))
"""),
))


# KIP-848's online upgrade and downgrade as each kind of member sees it over the wire
# (tests/compat/migration_cases.py: a classic member, then a consumer-protocol member upgrading
# the group, the classic member rejoining, the consumer-protocol member leaving; ConsumerGroupDescribe
# shows each member's type), then a mixed group (one member of each protocol, staying for its
# session) as kafka-consumer-groups shows it. (`--describe --members` lists the members in Kafka's
# hash-map order, which varies with the classic member's random id: not compared.)
KIP848_MIGRATION = Scenario("kip848-migration", steps=(
    topics("migration.create-topic", "--create", "--topic", "dmg-t", "--partitions", "2"),
    python("migration.upgrade-and-downgrade", _WIRE, """\
from tests.compat.migration_cases import walk
print(walk(sys.argv[1], "dmg-group", "dmg-t", "dmg-member-000000000000"))
"""),
    python("migration.mixed-group", _WIRE, """\
from tests.compat.migration_cases import mixed
print(mixed(sys.argv[1], "dmg-mixed", "dmg-t", "dmg-mixed-member-000000"))
"""),
    groups("migration.describe-state", "--describe", "--group", "dmg-mixed", "--state"),
    groups("migration.list", "--list", "--type", unordered=True),
))
