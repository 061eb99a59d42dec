"""A 3-node cluster with only SASL_SSL listeners (what `raftka cluster up --secure` runs):
replication between brokers over SASL_SSL (SCRAM, user `broker`), acks=all with RF=3, the
raftka SDK and CLI through client.properties (`--command-config`)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
import trio

from raftka.client.admin import AsyncAdmin, NewTopic
from raftka.client.consumer import AsyncConsumer
from raftka.client.errors import KafkaConnectionError
from raftka.client.producer import AsyncProducer
from raftka.client.records import TopicPartition
from raftka.client.security import ClientSecurity, read_properties_file
from raftka.testing.secure_cluster import secure_cluster
from tests.support import wait_until


@pytest.mark.slow
def test_replication_and_acks_all_with_only_sasl_ssl(tmp_path) -> None:
    cluster, setup = secure_cluster(tmp_path / "secure", 3)
    try:
        cluster.start_and_wait(timeout=120)
        bootstrap = cluster.bootstrap_servers
        security = ClientSecurity.from_properties(read_properties_file(str(setup.client_properties_path)))
        topic = f"secure-{uuid.uuid4().hex[:6]}"

        async def run() -> tuple[list, list]:
            async with AsyncAdmin(bootstrap, security=security) as admin:
                await admin.create_topics([NewTopic(topic, 1, 3, {"min.insync.replicas": "3"})])
            async with AsyncProducer(bootstrap, acks="all", security=security) as producer:
                offsets = [(await producer.send(topic, b"r%d" % i)).offset for i in range(20)]
            async with AsyncConsumer(bootstrap, auto_offset_reset="earliest", security=security) as consumer:
                consumer.assign([TopicPartition(topic, 0)])
                values: list = []
                with trio.fail_after(60):
                    while len(values) < 20:
                        batches = await consumer.poll(timeout_ms=1000)
                        values += [r.value for records in batches.values() for r in records]
            return offsets, values

        offsets, values = trio.run(run)
        # min.insync.replicas=3: every acks=all write reached both followers, which fetch over SASL_SSL.
        assert offsets == list(range(20))
        assert values == [b"r%d" % i for i in range(20)]
        # The followers' fetchers authenticated as User:broker at the leader.
        wait_until(lambda: any('"principal": "User:broker"' in node.log_path.read_text(errors="replace")
                               for node in cluster.nodes.values()), timeout=15,
                   what="User:broker's authentication in a node's log")
        listed = subprocess.run(
            [sys.executable, "-m", "raftka", "users", "list", "--bootstrap-server", cluster.nodes[1].bootstrap,
             "--command-config", str(setup.client_properties_path)],
            capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0, listed.stderr
        assert "admin: SCRAM-SHA-256 (iterations=4096), SCRAM-SHA-512 (iterations=4096)" in listed.stdout
        assert "broker: SCRAM-SHA-512" in listed.stdout
        config = ["--command-config", str(setup.client_properties_path)]
        perf = subprocess.run(
            [sys.executable, "-m", "raftka", "perf", "produce", "--bootstrap-server", bootstrap, "--topic", topic,
             "--num-records", "2000", "--record-size", "100", "--acks", "all", "--producers", "2", *config],
            capture_output=True, text=True, timeout=120)
        assert perf.returncode == 0, perf.stderr[-2000:]
        chaos = subprocess.run(
            [sys.executable, "-m", "raftka", "chaos", "run", "--against", bootstrap, "--nemesis", "none",
             "--time-limit", "3", "--rate", "20", "--out", str(tmp_path / "chaos"), *config],
            capture_output=True, text=True, timeout=180)
        assert chaos.returncode == 0, (chaos.stdout[-2000:], chaos.stderr[-2000:])
        # The admin tools take the same client.properties (they ignored it once, and spoke PLAINTEXT).
        raftka = [sys.executable, "-m", "raftka"]
        # This cluster has no authorizer: the broker's own SECURITY_DISABLED answer shows the
        # request went over SASL_SSL (a PLAINTEXT client never gets an answer there).
        acls = subprocess.run([*raftka, "acls", "list", "--bootstrap-server", bootstrap, "--topic", topic, *config],
                              capture_output=True, text=True, timeout=60)
        assert acls.returncode == 1 and "SECURITY_DISABLED" in acls.stderr, acls.stderr
        topics_file = tmp_path / "topics.json"
        topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
        plan = subprocess.run(
            [*raftka, "reassign", "generate", "--bootstrap-server", bootstrap, "--topics-to-move-json-file",
             str(topics_file), "--broker-list", "1,2,3", *config], capture_output=True, text=True, timeout=60)
        assert plan.returncode == 0, plan.stderr
        assert f'"topic": "{topic}"' in plan.stdout.replace('":"', '": "')
        unreachable = subprocess.run(
            [*raftka, "acls", "list", "--bootstrap-server", "127.0.0.1:1", *config],
            capture_output=True, text=True, timeout=60)
        assert unreachable.returncode == 1
        assert "Traceback" not in unreachable.stderr and "raftka acls list:" in unreachable.stderr
        refused = subprocess.run(
            [sys.executable, "-m", "raftka", "users", "list", "--bootstrap-server", cluster.nodes[1].bootstrap],
            capture_output=True, text=True, timeout=60)
        assert refused.returncode != 0  # PLAINTEXT on a SASL_SSL listener
        # ... says so in one line, with the way out (#31: it blamed a controller port).
        assert "is a TLS listener and this client spoke plaintext" in refused.stderr, refused.stderr
        assert "--command-config" in refused.stderr and len(refused.stderr.splitlines()) == 1

        # The SDK's clients wait for a cluster that is down, not for one that refuses their
        # configuration: start() says so at once (default_api_timeout_ms would wait a minute).
        async def plaintext_admin() -> None:
            async with AsyncAdmin(cluster.nodes[1].bootstrap):
                pass

        with pytest.raises(KafkaConnectionError, match="is a TLS listener and this client spoke plaintext"):
            trio.run(plaintext_admin)
    finally:
        cluster.stop()
