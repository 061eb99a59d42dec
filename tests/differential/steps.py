"""The steps the differential suite runs against both clusters, as data.

A scenario is an ordered list of steps that build on each other (create a topic, then describe
it); scenarios use their own names (dt-*, dc-*, dg-*, do-*, dk-*) so they do not depend on one
another. A step runs one of Kafka 4.4's CLI tools (tests/differential/tools.py) with `args`, in
which `{bootstrap}` is the cluster's address and `{work}` a folder holding the step's `files`.
`kafka_exit` is what Kafka itself must answer: a step Kafka does not answer that way is a broken
step, not a difference.

`bounded` scenarios run in `make test`; the others only with `--compat-full` (`make compat`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Step:
    id: str
    tool: str
    args: tuple[str, ...]
    kafka_exit: int = 0
    stdin: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    # The tool prints its lines in hash-map order (a listing of groups with random names, as
    # Kafka's `--list`): both outputs are compared with their lines sorted.
    unordered: bool = False


@dataclass(frozen=True)
class Scenario:
    name: str
    steps: tuple[Step, ...]
    bounded: bool = False


B = ("--bootstrap-server", "{bootstrap}")
# The prelude of a `python` step that imports the repository's tests (tests/differential/tools.py).
_REPO_ON_PATH = f"import sys\nsys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"


def topics(step_id: str, *args: str, kafka_exit: int = 0) -> Step:
    return Step(step_id, "kafka-topics", (*B, *args), kafka_exit)


def configs(step_id: str, *args: str, kafka_exit: int = 0) -> Step:
    return Step(step_id, "kafka-configs", (*B, *args), kafka_exit)


def groups(step_id: str, *args: str, kafka_exit: int = 0, unordered: bool = False) -> Step:
    return Step(step_id, "kafka-consumer-groups", (*B, *args), kafka_exit, unordered=unordered)


def produce(step_id: str, topic: str, lines: list[str]) -> Step:
    """Keyed records (`key:value` lines) through kafka-console-producer."""
    return Step(step_id, "kafka-console-producer",
                (*B, "--topic", topic, "--reader-property", "parse.key=true",
                 "--reader-property", "key.separator=:"), stdin="".join(f"{line}\n" for line in lines))


RECORDS = [f"k{i}:value-{i}" for i in range(10)]

TOPICS = Scenario("topics", bounded=True, steps=(
    topics("topics.create", "--create", "--topic", "dt-orders", "--partitions", "3",
           "--replication-factor", "1"),
    topics("topics.create-existing", "--create", "--topic", "dt-orders", "--partitions", "3",
           "--replication-factor", "1", kafka_exit=1),
    topics("topics.create-if-not-exists", "--create", "--if-not-exists", "--topic", "dt-orders",
           "--partitions", "3", "--replication-factor", "1"),
    topics("topics.list", "--list", "--topic", "dt-.*"),
    topics("topics.describe", "--describe", "--topic", "dt-orders"),
    topics("topics.alter-partitions", "--alter", "--topic", "dt-orders", "--partitions", "4"),
    topics("topics.describe-after-alter", "--describe", "--topic", "dt-orders"),
    topics("topics.delete", "--delete", "--topic", "dt-orders"),
))

MORE_TOPICS = Scenario("topics-more", steps=(
    topics("topics.create-more", "--create", "--topic", "dt-more", "--partitions", "2"),
    topics("topics.alter-fewer-partitions", "--alter", "--topic", "dt-more", "--partitions", "1",
           kafka_exit=1),
    topics("topics.create-rf-too-high", "--create", "--topic", "dt-rf3", "--replication-factor", "3",
           kafka_exit=1),
    topics("topics.create-bad-config-value", "--create", "--topic", "dt-bad", "--config",
           "retention.ms=abc", kafka_exit=1),
    topics("topics.create-unknown-config", "--create", "--topic", "dt-unknown", "--config",
           "no.such.config=1", kafka_exit=1),
    topics("topics.create-invalid-name", "--create", "--topic", "dt-bad/name", kafka_exit=1),
    topics("topics.create-compacted", "--create", "--topic", "dt-compacted", "--config",
           "cleanup.policy=compact", "--config", "min.compaction.lag.ms=1000"),
    topics("topics.describe-compacted", "--describe", "--topic", "dt-compacted"),
    topics("topics.describe-missing", "--describe", "--topic", "dt-missing", kafka_exit=1),
    topics("topics.describe-under-replicated", "--describe", "--under-replicated-partitions"),
    topics("topics.delete-missing", "--delete", "--topic", "dt-missing", kafka_exit=1),
))

CLUSTER_BASICS = Scenario("cluster-basics", bounded=True, steps=(
    Step("features.describe", "kafka-features", (*B, "describe")),
    Step("quorum.describe-status", "kafka-metadata-quorum", (*B, "describe", "--status")),
    Step("acls.list", "kafka-acls", (*B, "--list"), kafka_exit=1),
    Step("transactions.list", "kafka-transactions", (*B, "list")),
    Step("cluster.cluster-id", "kafka-cluster", ("cluster-id", *B)),
))

TOPIC_CONFIGS = Scenario("topic-configs", steps=(
    topics("configs.topic.create", "--create", "--topic", "dc-t", "--partitions", "1"),
    configs("configs.topic.describe-none", "--describe", "--entity-type", "topics", "--entity-name", "dc-t"),
    configs("configs.topic.alter-add", "--alter", "--entity-type", "topics", "--entity-name", "dc-t",
            "--add-config", "retention.ms=3600000,max.message.bytes=2000000"),
    configs("configs.topic.describe", "--describe", "--entity-type", "topics", "--entity-name", "dc-t"),
    configs("configs.topic.alter-list-value", "--alter", "--entity-type", "topics", "--entity-name",
            "dc-t", "--add-config", "cleanup.policy=[compact,delete]"),
    configs("configs.topic.alter-delete", "--alter", "--entity-type", "topics", "--entity-name", "dc-t",
            "--delete-config", "retention.ms"),
    configs("configs.topic.describe-after-delete", "--describe", "--entity-type", "topics",
            "--entity-name", "dc-t"),
    configs("configs.topic.alter-unknown", "--alter", "--entity-type", "topics", "--entity-name", "dc-t",
            "--add-config", "no.such.config=1", kafka_exit=1),
    configs("configs.topic.alter-bad-value", "--alter", "--entity-type", "topics", "--entity-name",
            "dc-t", "--add-config", "retention.ms=abc", kafka_exit=1),
    configs("configs.topic.describe-missing", "--describe", "--entity-type", "topics", "--entity-name",
            "dc-missing"),
    configs("configs.topic.describe-all", "--describe", "--all", "--entity-type", "topics",
            "--entity-name", "dc-t"),
    configs("configs.topic.describe-every-topic", "--describe", "--entity-type", "topics"),
))

BROKER_CONFIGS = Scenario("broker-configs", steps=(
    configs("configs.broker.describe", "--describe", "--entity-type", "brokers", "--entity-name", "1"),
    configs("configs.broker.describe-default", "--describe", "--entity-type", "brokers", "--entity-default"),
    configs("configs.broker.alter-default", "--alter", "--entity-type", "brokers", "--entity-default",
            "--add-config", "log.retention.ms=86400000"),
    configs("configs.broker.describe-default-after", "--describe", "--entity-type", "brokers",
            "--entity-default"),
    configs("configs.broker.alter-delete-default", "--alter", "--entity-type", "brokers",
            "--entity-default", "--delete-config", "log.retention.ms"),
    configs("configs.broker.alter-cleaner-threads", "--alter", "--entity-type", "brokers",
            "--entity-name", "1", "--add-config", "log.cleaner.threads=2"),
    configs("configs.broker.describe-after-alter", "--describe", "--entity-type", "brokers",
            "--entity-name", "1"),
    configs("configs.broker.alter-read-only", "--alter", "--entity-type", "brokers", "--entity-name",
            "1", "--add-config", "log.dirs=/elsewhere", kafka_exit=1),
    configs("configs.broker.alter-unknown", "--alter", "--entity-type", "brokers", "--entity-name",
            "1", "--add-config", "no.such.config=1"),
    configs("configs.broker.alter-default-unknown", "--alter", "--entity-type", "brokers", "--entity-default",
            "--add-config", "no.such.default.config=1"),
    configs("configs.broker.describe-all", "--describe", "--all", "--entity-type", "brokers",
            "--entity-name", "1"),
    configs("configs.broker-loggers.describe", "--describe", "--entity-type", "broker-loggers",
            "--entity-name", "1"),
    configs("configs.users.describe", "--describe", "--entity-type", "users"),
    configs("configs.users.add-scram", "--alter", "--entity-type", "users", "--entity-name", "dk-alice",
            "--add-config", "SCRAM-SHA-256=[iterations=4096,password=alice-secret]"),
    configs("configs.users.describe-scram", "--describe", "--entity-type", "users", "--entity-name",
            "dk-alice"),
    configs("configs.clients.describe", "--describe", "--entity-type", "clients"),
    configs("configs.clients.add-quota", "--alter", "--entity-type", "clients", "--entity-name",
            "dk-client", "--add-config", "producer_byte_rate=1048576"),
    configs("configs.ips.describe", "--describe", "--entity-type", "ips"),
    configs("configs.groups.describe", "--describe", "--entity-type", "groups", "--entity-name",
            "dk-group"),
    configs("configs.groups.alter-out-of-bounds", "--alter", "--entity-type", "groups", "--entity-name",
            "dk-group", "--add-config", "consumer.session.timeout.ms=1000", kafka_exit=1),
    configs("configs.groups.alter", "--alter", "--entity-type", "groups", "--entity-name", "dk-group",
            "--add-config", "consumer.heartbeat.interval.ms=12000"),
    configs("configs.groups.describe-after-alter", "--describe", "--entity-type", "groups", "--entity-name",
            "dk-group"),
    configs("configs.groups.describe-all", "--describe", "--all", "--entity-type", "groups", "--entity-name",
            "dk-group"),
))

GROUPS = Scenario("groups", steps=(
    topics("groups.create-topic", "--create", "--topic", "dg-t", "--partitions", "1"),
    produce("groups.produce", "dg-t", RECORDS[:6]),
    Step("groups.consume", "kafka-console-consumer",
         (*B, "--topic", "dg-t", "--group", "dg-group", "--from-beginning", "--max-messages", "6",
          "--timeout-ms", "30000", "--formatter-property", "print.key=true",
          "--formatter-property", "print.offset=true")),
    groups("groups.list", "--list"),
    groups("groups.list-state", "--list", "--state"),
    groups("groups.describe", "--describe", "--group", "dg-group"),
    groups("groups.describe-members", "--describe", "--group", "dg-group", "--members"),
    groups("groups.describe-state", "--describe", "--group", "dg-group", "--state"),
    groups("groups.describe-missing", "--describe", "--group", "dg-missing"),
    groups("groups.reset-dry-run", "--reset-offsets", "--group", "dg-group", "--topic", "dg-t",
           "--to-earliest", "--dry-run"),
    groups("groups.reset-execute", "--reset-offsets", "--group", "dg-group", "--topic", "dg-t",
           "--to-offset", "2", "--execute"),
    groups("groups.describe-after-reset", "--describe", "--group", "dg-group"),
    groups("groups.delete-offsets", "--delete-offsets", "--group", "dg-group", "--topic", "dg-t"),
    groups("groups.delete", "--delete", "--group", "dg-group"),
    groups("groups.delete-missing", "--delete", "--group", "dg-missing"),
    Step("groups.kafka-groups-list", "kafka-groups", (*B, "--list")),
))

def share_groups(step_id: str, *args: str, kafka_exit: int = 0) -> Step:
    return Step(step_id, "kafka-share-groups", (*B, *args), kafka_exit)


# Share groups (KIP-932): kafka-console-share-consumer reads from the start (the group's
# share.auto.offset.reset), then kafka-share-groups lists, describes, resets and deletes.
SHARE_GROUPS = Scenario("share-groups", steps=(
    topics("share.create-topic", "--create", "--topic", "ds-t", "--partitions", "1"),
    produce("share.produce", "ds-t", RECORDS[:5]),
    configs("share.configs.earliest", "--alter", "--entity-type", "groups", "--entity-name", "ds-group",
            "--add-config", "share.auto.offset.reset=earliest"),
    configs("share.configs.describe", "--describe", "--entity-type", "groups", "--entity-name", "ds-group"),
    configs("share.configs.describe-all", "--describe", "--all", "--entity-type", "groups", "--entity-name",
            "ds-group"),
    Step("share.consume", "kafka-console-share-consumer",
         (*B, "--topic", "ds-t", "--group", "ds-group", "--max-messages", "5", "--timeout-ms", "30000",
          "--formatter-property", "print.key=true", "--formatter-property", "print.offset=true")),
    share_groups("share.list", "--list"),
    share_groups("share.list-state", "--list", "--state"),
    share_groups("share.describe", "--describe", "--group", "ds-group"),
    share_groups("share.describe-members", "--describe", "--group", "ds-group", "--members"),
    share_groups("share.describe-state", "--describe", "--group", "ds-group", "--state"),
    # The epochs: a new group is at 1, the console consumer's join and leave move it to 3.
    share_groups("share.describe-state-verbose", "--describe", "--group", "ds-group", "--state", "--verbose"),
    share_groups("share.describe-offsets", "--describe", "--group", "ds-group", "--offsets"),
    share_groups("share.describe-missing", "--describe", "--group", "ds-missing"),
    share_groups("share.reset-dry-run", "--reset-offsets", "--group", "ds-group", "--topic", "ds-t",
                 "--to-earliest", "--dry-run"),
    share_groups("share.reset-execute", "--reset-offsets", "--group", "ds-group", "--topic", "ds-t",
                 "--to-earliest", "--execute"),
    share_groups("share.describe-after-reset", "--describe", "--group", "ds-group", "--offsets"),
    share_groups("share.describe-state-after-reset", "--describe", "--group", "ds-group", "--state",
                 "--verbose"),
    share_groups("share.delete", "--delete", "--group", "ds-group"),
    share_groups("share.delete-missing", "--delete", "--group", "ds-missing"),
    # A deleted group's dynamic configs stay, as in Kafka 4.4.
    configs("share.configs.describe-after-delete", "--describe", "--entity-type", "groups", "--entity-name",
            "ds-group"),
    share_groups("share.list-after-delete", "--list"),
    # The subscribed topics' metadata hash (KIP-1101) in the ShareGroupMetadata records: the
    # group epoch moves when partitions are added (tests/compat/share_group_cases.py).
    topics("share.create-hash-topic", "--create", "--topic", "dsh-t", "--partitions", "2"),
    Step("share.metadata-hash", "python", (_REPO_ON_PATH + """\
from tests.compat.share_group_cases import metadata_hash_records
print(metadata_hash_records(sys.argv[1], "dsh-group", "dsh-t", "dsh-member-000000000000"))
""", "{bootstrap}")),
))

# The share groups' dead-letter queue (KIP-1191, share.version 2): a group names its DLQ topic
# (errors.deadletterqueue.topic.name, under the broker's `dlq.` prefix; the topic must allow it with
# errors.deadletterqueue.group.enable), and a record REJECTed, or released at the group's
# delivery count limit, is written there with the __dlq.errors.* headers (and, with
# errors.deadletterqueue.copy.record.enable, its key and value; never its own headers).
DLQ_READ = ("--from-beginning", "--timeout-ms", "30000", "--formatter-property", "print.key=true",
            "--formatter-property", "print.headers=true", "--formatter-property", "print.partition=true",
            "--formatter-property", "print.offset=true")
SHARE_DLQ = Scenario("share-dlq", steps=(
    topics("dlq.create-topic", "--create", "--topic", "dq-t", "--partitions", "1"),
    topics("dlq.create-dlq-topic", "--create", "--topic", "dlq.dq-t", "--partitions", "1",
           "--config", "errors.deadletterqueue.group.enable=true"),
    Step("dlq.produce", "kafka-console-producer",
         (*B, "--topic", "dq-t", "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
          "--reader-property", "parse.headers=true"),
         stdin="".join(f"h:v{i}\tk{i}:value-{i}\n" for i in range(3))),
    configs("dlq.configs.bad-name", "--alter", "--entity-type", "groups", "--entity-name", "dq-group",
            "--add-config", "errors.deadletterqueue.topic.name=__dq", kafka_exit=1),
    configs("dlq.configs.group", "--alter", "--entity-type", "groups", "--entity-name", "dq-group",
            "--add-config", "share.auto.offset.reset=earliest,errors.deadletterqueue.topic.name=dlq.dq-t,"
                            "errors.deadletterqueue.copy.record.enable=true"),
    Step("dlq.reject", "kafka-console-share-consumer",
         (*B, "--topic", "dq-t", "--group", "dq-group", "--max-messages", "3", "--timeout-ms", "30000",
          "--reject", "--formatter-property", "print.offset=true")),
    Step("dlq.read-rejected", "kafka-console-consumer",
         (*B, "--topic", "dlq.dq-t", "--max-messages", "3", *DLQ_READ)),
    # A poison record: released at every delivery, it reaches the delivery count limit (2).
    produce("dlq.produce-poison", "dq-t", ["k3:poison"]),
    configs("dlq.configs.limit", "--alter", "--entity-type", "groups", "--entity-name", "dq-group",
            "--add-config", "share.delivery.count.limit=2,errors.deadletterqueue.copy.record.enable=false"),
    Step("dlq.release", "kafka-console-share-consumer",
         (*B, "--topic", "dq-t", "--group", "dq-group", "--max-messages", "2", "--timeout-ms", "30000",
          "--release", "--formatter-property", "print.offset=true")),
    Step("dlq.read-poison", "kafka-console-consumer",
         (*B, "--topic", "dlq.dq-t", "--max-messages", "4", *DLQ_READ)),
))

OFFSETS = Scenario("offsets-and-records", steps=(
    topics("offsets.create-topic", "--create", "--topic", "do-t", "--partitions", "1"),
    topics("offsets.create-empty-topic", "--create", "--topic", "do-empty", "--partitions", "1"),
    produce("offsets.produce", "do-t", RECORDS),
    topics("offsets.create-one-record-topic", "--create", "--topic", "do-one", "--partitions", "1"),
    produce("offsets.produce-one", "do-one", RECORDS[:1]),
    Step("offsets.latest", "kafka-get-offsets", (*B, "--topic", "do-t", "--time", "-1")),
    Step("offsets.earliest", "kafka-get-offsets", (*B, "--topic", "do-t", "--time", "-2")),
    # One record: its offset is the max timestamp's whatever the clock did between records.
    Step("offsets.max-timestamp", "kafka-get-offsets", (*B, "--topic", "do-one", "--time", "-3")),
    Step("offsets.earliest-local", "kafka-get-offsets", (*B, "--topic", "do-t", "--time", "-4")),
    Step("offsets.latest-tiered", "kafka-get-offsets", (*B, "--topic", "do-t", "--time", "-5")),
    Step("offsets.by-timestamp-zero", "kafka-get-offsets", (*B, "--topic", "do-t", "--time", "0")),
    Step("offsets.topic-regex", "kafka-get-offsets", (*B, "--topic-partitions", "do-.*")),
    Step("records.delete", "kafka-delete-records", (*B, "--offset-json-file", "{work}/delete.json"),
         files={"delete.json": '{"partitions": [{"topic": "do-t", "partition": 0, "offset": 4}], '
                               '"version": 1}'}),
    Step("offsets.earliest-after-delete", "kafka-get-offsets", (*B, "--topic", "do-t", "--time", "-2")),
    Step("records.delete-beyond-end", "kafka-delete-records",
         (*B, "--offset-json-file", "{work}/beyond.json"),
         files={"beyond.json": '{"partitions": [{"topic": "do-t", "partition": 0, "offset": 100}], '
                               '"version": 1}'}),
    Step("log-dirs.describe-empty-topic", "kafka-log-dirs",
         (*B, "--describe", "--topic-list", "do-empty")),
))

OPERATIONS = Scenario("operations", steps=(
    Step("quorum.describe-replication", "kafka-metadata-quorum", (*B, "describe", "--replication")),
    Step("api-versions", "kafka-broker-api-versions", B),
    topics("operations.create-topic", "--create", "--topic", "dk-t", "--partitions", "2"),
    Step("leader-election.preferred", "kafka-leader-election",
         (*B, "--election-type", "preferred", "--topic", "dk-t", "--partition", "0")),
    Step("reassign.generate", "kafka-reassign-partitions",
         (*B, "--topics-to-move-json-file", "{work}/move.json", "--broker-list", "1", "--generate"),
         files={"move.json": '{"topics": [{"topic": "dk-t"}], "version": 1}'}),
    Step("reassign.list", "kafka-reassign-partitions", (*B, "--list")),
    Step("transactions.find-hanging", "kafka-transactions", (*B, "find-hanging", "--broker-id", "1")),
    Step("transactions.describe-missing", "kafka-transactions",
         (*B, "describe", "--transactional-id", "dk-missing"), kafka_exit=1),
    Step("transactions.describe-producers", "kafka-transactions",
         (*B, "describe-producers", "--topic", "dk-t", "--partition", "0")),
    Step("client-metrics.list", "kafka-client-metrics", (*B, "--list")),
    Step("client-metrics.describe", "kafka-client-metrics", (*B, "--describe")),
))

CONFIG_RESOURCES = Scenario("config-resources", steps=(
    Step("client-metrics.alter", "kafka-client-metrics",
         (*B, "--alter", "--name", "dk-sub", "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
          "--interval", "60000", "--match", "client_id=dk-.*")),
    Step("client-metrics.describe-one", "kafka-client-metrics", (*B, "--describe", "--name", "dk-sub")),
    Step("client-metrics.list-one", "kafka-client-metrics", (*B, "--list")),
    configs("configs.client-metrics.describe", "--describe", "--entity-type", "client-metrics",
            "--entity-name", "dk-sub"),
    Step("client-metrics.alter-bad-interval", "kafka-client-metrics",
         (*B, "--alter", "--name", "dk-bad", "--interval", "50"), kafka_exit=1),
    Step("client-metrics.alter-bad-match", "kafka-client-metrics",
         (*B, "--alter", "--name", "dk-bad", "--match", "client_color=red"), kafka_exit=1),
    Step("client-metrics.delete", "kafka-client-metrics", (*B, "--delete", "--name", "dk-sub")),
    Step("client-metrics.list-after-delete", "kafka-client-metrics", (*B, "--list")),
    configs("configs.broker-loggers.alter", "--alter", "--entity-type", "broker-loggers", "--entity-name", "1",
            "--add-config", "root=INFO"),
    configs("configs.broker-loggers.alter-bad-level", "--alter", "--entity-type", "broker-loggers",
            "--entity-name", "1", "--add-config", "root=LOUD", kafka_exit=1),
    configs("configs.broker-loggers.delete-root", "--alter", "--entity-type", "broker-loggers",
            "--entity-name", "1", "--delete-config", "root", kafka_exit=1),
))
