"""ACLs on a real 3-node cluster (real processes): replication works with the authorizer on
(PLAINTEXT inter-broker traffic is User:ANONYMOUS, so it needs CLUSTER_ACTION, given here by
an ACL), and the ACLs survive the active controller's crash: the new controller still
enforces them and changes them."""

from __future__ import annotations

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
)
from confluent_kafka.admin import ResourcePatternType as Pattern
from confluent_kafka.admin import ResourceType as Resource

from raftka.client.blocking import Admin
from raftka.raft_meta.security.authorizer import STANDARD_AUTHORIZER
from tests.integration.cluster_support import bootstrap_of, create_topic, running_cluster
from tests.support import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
ANON = "User:ANONYMOUS"


def _deliver(bootstrap: str, topic: str):
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000,
                                         "log_level": 0})
    outcome: list = []
    producer.produce(topic, b"v", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(40)
    assert outcome, "no delivery report"
    return outcome[0]


def test_acls_enforced_across_replication_and_a_controller_crash(tmp_path):
    with running_cluster(tmp_path, 3, extra={"authorizer.class.name": STANDARD_AUTHORIZER,
                                             "allow.everyone.if.no.acl.found": "true"}) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
        [f.result(30) for f in admin.create_acls([
            AclBinding(kind, name, Pattern.LITERAL, ANON, "*", AclOperation.ALL, AclPermissionType.ALLOW)
            for kind, name in ((Resource.BROKER, "kafka-cluster"), (Resource.TOPIC, "*"), (Resource.GROUP, "*"))
        ]).values()]
        create_topic(cluster, "acl-rep", rf=3)  # a full ISR: followers fetch with CLUSTER_ACTION
        assert _deliver(cluster.bootstrap, "acl-rep") is None  # acks=all: replicated
        deny = AclBinding(Resource.TOPIC, "acl-rep", Pattern.LITERAL, ANON, "*", AclOperation.WRITE,
                          AclPermissionType.DENY)
        [f.result(30) for f in admin.create_acls([deny]).values()]

        def denied() -> bool:
            error = _deliver(cluster.bootstrap, "acl-rep")
            assert error is None or error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED, error
            return error is not None

        # CreateAcls answers once the controller commits; each broker applies the record from the
        # metadata log a moment later (as on Kafka), so a write may still pass just after it.
        wait_until(denied, timeout=60, what="the deny ACL reaching the partition leader")
        del admin

        with Admin(cluster.bootstrap) as sdk:
            controller = sdk.describe_cluster().controller_id
        cluster.kill(controller)
        survivors = bootstrap_of(cluster, {controller})

        def new_controller():
            with Admin(survivors) as sdk:
                c = sdk.describe_cluster().controller_id
                return c if c not in (-1, controller) else None

        wait_until(new_controller, timeout=60, what="a new active controller")
        admin = AdminClient({"bootstrap.servers": survivors, "log_level": 0})
        everything = AclBindingFilter(Resource.ANY, None, Pattern.ANY, None, None, AclOperation.ANY,
                                      AclPermissionType.ANY)
        assert deny in admin.describe_acls(everything).result(30)
        error = _deliver(survivors, "acl-rep")
        assert error is not None and error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
        # The new controller changes ACLs: the deny goes, and writes are allowed again.
        deleted = [f.result(30) for f in admin.delete_acls([AclBindingFilter(
            Resource.TOPIC, "acl-rep", Pattern.LITERAL, ANON, None, AclOperation.WRITE,
            AclPermissionType.DENY)]).values()]
        assert deleted == [[deny]]
        assert wait_until(lambda: _deliver(survivors, "acl-rep") is None, timeout=60, what="an allowed write")
        del admin
