"""TLS and SASL against real clients (librdkafka via confluent-kafka, kafka-python).

One node with two client listeners: SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; the
inter-broker listener, SCRAM-SHA-256 as user `broker`) and SSL with
`ssl.client.auth=required` (mTLS, principal from the certificate through
`ssl.principal.mapping.rules`). SCRAM users are created with the cluster
(`storage format --add-scram`'s bootstrap file) and with the SDK's Admin API.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from raftka.cli.storage import scram_bootstrap_records
from raftka.client.admin import AsyncAdmin
from raftka.client.errors import KafkaError
from raftka.client.scram_admin import ScramUpsert, alter_users, describe_users
from raftka.client.security import ClientSecurity
from raftka.raft_meta.metadata.bootstrap_records import write_bootstrap
from raftka.testing import certs
from raftka.testing.local_cluster import LocalCluster, free_low_port
from tests.support import wait_until

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
              'password="broker-secret" user_bob="bob-secret";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
              'password="broker-secret";')
USERS = {"PLAIN": ("bob", "bob-secret"), "SCRAM-SHA-256": ("alice", "alice-secret"),
         "SCRAM-SHA-512": ("alice", "alice-secret")}


class Secured:
    def __init__(self, directory: Path) -> None:
        self.tls = directory / "tls"
        self.ca = certs.make_ca("test CA")
        self.ca_path = certs.write_ca(self.ca, self.tls)
        other = certs.make_ca("another CA")
        self.other_ca_path = certs.write_ca(other, self.tls / "other")
        self.client_cert, self.client_key = certs.write_cert_and_key(
            certs.issue(self.ca, "alice-cert", unit="Svc"), self.tls, "client")
        self.ssl_port = free_low_port(set())
        self.cluster = LocalCluster(directory, 1, listener_protocol="SASL_SSL", node_config=self.node_config,
                                    extra_config={"num.partitions": "1", "group.initial.rebalance.delay.ms": "0"})

    def node_config(self, node) -> dict[str, str]:
        keystore = node.directory / "tls" / "keystore.pem"
        if not keystore.exists():
            certs.write_keystore(certs.issue(self.ca, "node-1", hosts=("127.0.0.1", "localhost")), self.ca, keystore)
            meta = node.metadata_log_dir  # Kafka's default layout: the first log dir
            meta.mkdir(parents=True, exist_ok=True)
            write_bootstrap(meta, scram_bootstrap_records((
                "SCRAM-SHA-256=[name=alice,password=alice-secret]",
                "SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]",
                'SCRAM-SHA-256=[name=broker,password="broker-secret"]')))
        host = "127.0.0.1"
        self.sasl_bootstrap = f"{host}:{node.client_port}"
        self.ssl_bootstrap = f"{host}:{self.ssl_port}"
        return {
            "listeners": f"SASL_SSL://{host}:{node.client_port},SSL://{host}:{self.ssl_port},"
                         f"CONTROLLER://{host}:{node.quorum_port}",
            "advertised.listeners": f"SASL_SSL://{host}:{node.client_port},SSL://{host}:{self.ssl_port}",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "SASL_SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_path),
            "listener.name.ssl.ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=Svc.*$/$1/,DEFAULT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        }

    def log_events(self, event: str) -> list[str]:
        """The node's log lines of `event` now in its file (which lags the server: see `logged`)."""
        text = self.cluster.nodes[1].log_path.read_text(errors="replace")
        return [line for line in text.splitlines() if f'"event": "{event}"' in line]

    def logged(self, event: str, *needles: str) -> str:
        """The first line of `event` containing every needle, once the log file shows one: the
        server's stderr reaches the file through a pipe and a reader thread."""
        return wait_until(lambda: next((line for line in self.log_events(event)
                                        if all(n in line for n in needles)), None),
                          what=f"the server's log to show {event} with {needles}")

    def confluent(self, mechanism: str | None, *, user: str | None = None, password: str | None = None,
                  ca: Path | None = None, mtls: bool = False) -> dict:
        conf = {"ssl.ca.location": str(ca or self.ca_path), "socket.timeout.ms": 10000}
        if mechanism is None:
            conf.update({"bootstrap.servers": self.ssl_bootstrap, "security.protocol": "SSL"})
            if mtls:
                conf.update({"ssl.certificate.location": str(self.client_cert),
                             "ssl.key.location": str(self.client_key)})
            return conf
        default_user, default_password = USERS[mechanism]
        conf.update({"bootstrap.servers": self.sasl_bootstrap, "security.protocol": "SASL_SSL",
                     "sasl.mechanism": mechanism, "sasl.username": user or default_user,
                     "sasl.password": password or default_password})
        return conf

    def kafka_python(self, mechanism: str | None) -> dict:
        if mechanism is None:
            return {"bootstrap_servers": self.ssl_bootstrap, "security_protocol": "SSL",
                    "ssl_cafile": str(self.ca_path), "ssl_certfile": str(self.client_cert),
                    "ssl_keyfile": str(self.client_key)}
        user, password = USERS[mechanism]
        return {"bootstrap_servers": self.sasl_bootstrap, "security_protocol": "SASL_SSL",
                "ssl_cafile": str(self.ca_path), "sasl_mechanism": mechanism,
                "sasl_plain_username": user, "sasl_plain_password": password}

    def sdk(self, user: str = "alice", password: str = "alice-secret") -> ClientSecurity:
        return ClientSecurity("SASL_SSL", "SCRAM-SHA-512", user, password, ssl_cafile=str(self.ca_path))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    setup = Secured(tmp_path_factory.mktemp("secured"))
    try:
        setup.cluster.start_and_wait(timeout=90)
        yield setup
    finally:
        setup.cluster.stop()


def _confluent_round_trip(conf: dict, topic: str, count: int = 3) -> list[bytes]:
    from confluent_kafka import Consumer, Producer

    producer = Producer({**conf, "acks": "all"})
    errors: list = []
    for i in range(count):
        producer.produce(topic, b"v%d" % i, on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(60) == 0 and not errors, errors
    consumer = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
    consumer.close()
    return values


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_librdkafka_over_sasl_ssl(secured: Secured, mechanism: str) -> None:
    topic = f"sec-cf-{mechanism.lower()}"
    assert _confluent_round_trip(secured.confluent(mechanism), topic) == [b"v0", b"v1", b"v2"]
    user = USERS[mechanism][0]
    secured.logged("sasl.authenticated", f'"principal": "User:{user}"', mechanism)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", None])
def test_kafka_python_over_sasl_ssl_and_mtls(secured: Secured, mechanism: str | None) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    conf = secured.kafka_python(mechanism)
    topic = f"sec-kp-{(mechanism or 'mtls').lower()}"
    producer = KafkaProducer(acks="all", **conf)
    for i in range(3):
        producer.send(topic, b"k%d" % i).get(timeout=60)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=20000, **conf)
    values = [m.value for _, m in zip(range(3), consumer, strict=False)]
    consumer.close()
    assert values == [b"k0", b"k1", b"k2"]
    if mechanism is not None:  # kafka-python 3 takes the newest SaslAuthenticate: v2, the flexible one
        user = USERS[mechanism][0]
        secured.logged("sasl.authenticated", f'"principal": "User:{user}"', '"version": 2')


def test_mtls_principal_from_the_certificate(secured: Secured) -> None:
    assert _confluent_round_trip(secured.confluent(None, mtls=True), "sec-mtls") == [b"v0", b"v1", b"v2"]
    # RULE:^CN=(.*?),OU=Svc.*$/$1/ maps CN=alice-cert,OU=Svc,O=raftka to alice-cert.
    secured.logged("tls.client_authenticated", '"principal": "User:alice-cert"')


def _metadata_fails(conf: dict, expect: str = "") -> str:
    """The error librdkafka reports when this client cannot get metadata: the request fails, then
    the error callback reports the refusal (`expect`, any error if empty), waited for."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list = []
    admin = AdminClient({**conf, "error_cb": errors.append})
    with pytest.raises(KafkaException) as info:
        admin.list_topics(timeout=1)  # refused clients never get metadata: a timeout fails too

    def reported() -> str | None:
        admin.poll(0.1)  # error callbacks are served by poll
        text = " ".join(str(e) for e in [*errors, info.value])
        return text if errors and expect.lower() in text.lower() else None

    return wait_until(reported, timeout=30, interval=0, what=f"librdkafka's error callback ({expect!r})")


def test_refused_clients_and_the_broker_keeps_serving(secured: Secured) -> None:
    failures = len(secured.log_events("sasl.authentication_failed"))
    # A wrong password: SASL_AUTHENTICATION_FAILED, then the connection is closed.
    error = _metadata_fails(secured.confluent("SCRAM-SHA-256", password="wrong"), "Authentication failed")
    assert "Authentication failed" in error
    wait_until(lambda: len(secured.log_events("sasl.authentication_failed")) > failures, timeout=30)
    # A PLAIN user with a wrong password, and an unknown SCRAM user.
    invalid = "Invalid username or password"
    assert invalid in _metadata_fails(secured.confluent("PLAIN", password="nope"), invalid)
    failed = "Authentication failed"
    assert failed in _metadata_fails(secured.confluent("SCRAM-SHA-512", user="mallory"), failed)
    # A client that trusts another CA refuses the broker's certificate.
    other_ca = secured.confluent("SCRAM-SHA-256", ca=secured.other_ca_path)
    assert "certificate" in _metadata_fails(other_ca, "certificate").lower()
    # An SSL client without a certificate on the mTLS listener: the handshake fails.
    _metadata_fails(secured.confluent(None, mtls=False))
    # A plaintext client on the TLS port: no Kafka answer, the connection is closed.
    host, port = secured.sasl_bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
        raw.sendall(struct.pack(">i", len(body)) + body)
        reply = raw.recv(4096)
        assert not reply or reply[0] == 0x15  # closed, or a TLS alert record: never a Kafka frame
    # Before authentication only ApiVersions/SaslHandshake/SaslAuthenticate are served: a
    # Metadata request on a fresh SASL_SSL connection is closed without a reply.
    context = ssl.create_default_context(cafile=str(secured.ca_path))
    with socket.create_connection((host, int(port)), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls:
        body = struct.pack(">hhih", 3, 0, 7, 4) + b"test" + struct.pack(">i", 0)
        tls.sendall(struct.pack(">i", len(body)) + body)
        assert tls.recv(4096) == b""
    # kafka-python: a wrong password and a client trusting another CA are refused too.
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaTimeoutError

    KafkaAdminClient(**secured.kafka_python("SCRAM-SHA-256"), request_timeout_ms=5000).close()  # the control
    for overrides in ({"sasl_plain_password": "wrong"}, {"ssl_cafile": str(secured.other_ca_path)}):
        with pytest.raises(KafkaTimeoutError, match="Unable to bootstrap"):
            KafkaAdminClient(**{**secured.kafka_python("SCRAM-SHA-256"), **overrides}, request_timeout_ms=5000,
                             bootstrap_timeout_ms=2000)  # never bootstraps: a short deadline
    # Every refusal cost only its own connection.
    assert _confluent_round_trip(secured.confluent("SCRAM-SHA-512"), "sec-after-refusals") == [b"v0", b"v1", b"v2"]


def test_users_from_the_admin_api_survive_a_restart(secured: Secured) -> None:
    async def create() -> list:
        async with AsyncAdmin(secured.sasl_bootstrap, security=secured.sdk()) as admin:
            await alter_users(admin, [ScramUpsert("carol", "SCRAM-SHA-256", "carol-secret"),
                                      ScramUpsert("carol", "SCRAM-SHA-512", "carol-secret", 4096)])
            return await describe_users(admin)

    async def refused() -> list[str]:
        errors = []
        async with AsyncAdmin(secured.sasl_bootstrap, security=secured.sdk()) as admin:
            for call in (lambda: alter_users(admin, [ScramUpsert("dave", "SCRAM-SHA-256", "p", iterations=100)]),
                         lambda: alter_users(admin, deletions=[("nobody", "SCRAM-SHA-512")]),
                         lambda: describe_users(admin, ["nobody"])):
                try:
                    await call()
                except KafkaError as exc:
                    errors.append(type(exc).__name__ + ": " + str(exc))
        return errors

    errors = trio.run(refused)
    assert len(errors) == 3, errors
    assert "Too few iterations" in errors[0] and "does not exist" in errors[1] and "nobody" in errors[2]
    listed = {info.user: info.mechanisms for info in trio.run(create)}
    assert listed["carol"] == (("SCRAM-SHA-256", 4096), ("SCRAM-SHA-512", 4096))
    assert listed["alice"] == (("SCRAM-SHA-256", 4096), ("SCRAM-SHA-512", 8192))
    cluster = secured.cluster
    cluster.stop_node(1)
    cluster.start_node(1, wait=True, timeout=90)
    conf = secured.confluent("SCRAM-SHA-256", user="carol", password="carol-secret")
    assert _confluent_round_trip(conf, "sec-carol") == [b"v0", b"v1", b"v2"]

    async def delete() -> list:
        async with AsyncAdmin(secured.sasl_bootstrap, security=secured.sdk()) as admin:
            await alter_users(admin, deletions=[("carol", "SCRAM-SHA-256"), ("carol", "SCRAM-SHA-512")])
            return await describe_users(admin)

    assert "carol" not in {info.user for info in trio.run(delete)}
    assert "Authentication failed" in _metadata_fails(conf, "Authentication failed")


def test_users_from_librdkafka_admin_client(secured: Secured) -> None:
    """confluent-kafka's AdminClient.alter/describe_user_scram_credentials (KIP-554), which
    librdkafka refuses unless ApiVersions advertises keys 50 and 51; the user then logs in."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(secured.confluent("SCRAM-SHA-512"))
    upserts = [UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                            b"erin-secret"),
               UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                            b"erin-secret", salt=b"erin-salt")]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(30)
    described = admin.describe_user_scram_credentials(["erin"])["erin"].result(30)
    assert sorted((info.mechanism, info.iterations) for info in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 4096)]
    everyone = admin.describe_user_scram_credentials().result(30)
    assert {"alice", "erin"} <= set(everyone)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        conf = secured.confluent(mechanism, user="erin", password="erin-secret")
        assert _confluent_round_trip(conf, f"sec-erin-{mechanism[-3:]}") == [b"v0", b"v1", b"v2"]
    deletion = UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_256)
    admin.alter_user_scram_credentials([deletion])["erin"].result(30)
    left = admin.describe_user_scram_credentials(["erin"])["erin"].result(30)
    assert [info.mechanism for info in left.scram_credential_infos] == [ScramMechanism.SCRAM_SHA_512]


def test_spark_source_options_reach_a_secured_broker(secured: Secured) -> None:
    """Spark's Kafka-source option names (kafka.security.protocol, kafka.sasl.*, kafka.ssl.*),
    through the source's own driver-side reader (no SparkSession needed for this)."""
    from raftka.spark_source.log_reader import list_offsets, run_with_cluster, topic_partitions
    from raftka.spark_source.options import parse_options

    _confluent_round_trip(secured.confluent("SCRAM-SHA-256"), "sec-spark")
    options = parse_options({
        "kafka.bootstrap.servers": secured.sasl_bootstrap, "subscribe": "sec-spark",
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="alice" password="alice-secret";',
        "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(secured.ca_path)})

    async def latest(cluster) -> dict:
        partitions = await topic_partitions(cluster, options)
        return await list_offsets(cluster, {tp: -1 for tp in partitions})

    assert run_with_cluster(options, latest, topics=["sec-spark"]) == {("sec-spark", 0): 3}


def test_large_fetch_over_tls_falls_back_from_sendfile(secured: Secured) -> None:
    """Record bytes of 16 KiB and more go out by sendfile on PLAINTEXT; under TLS they are read
    in a worker thread and encrypted (broker/net/zero_copy.py)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    conf = secured.confluent("SCRAM-SHA-512")
    producer = Producer({**conf, "acks": "all", "compression.type": "none"})
    big = bytes(range(256)) * 1024  # 256 KiB
    producer.produce("sec-big", big)
    assert producer.flush(60) == 0
    consumer = Consumer({**conf, "group.id": "sec-big", "enable.auto.commit": False})
    consumer.assign([TopicPartition("sec-big", 0, 0)])
    deadline = time.monotonic() + 60
    msg = None
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            break
    consumer.close()
    assert msg is not None and msg.value() == big


def test_sdk_mtls_with_a_pem_key_store(secured: Secured) -> None:
    """The SDK over SSL with a client certificate from one PEM key store file (key + chain),
    as a broker connects to an SSL inter-broker listener (broker/net/tls.py inter_broker_security)."""
    keystore = certs.write_keystore(certs.issue(secured.ca, "sdk-client", unit="Svc"), secured.ca,
                                    secured.tls / "sdk-keystore.pem")
    security = ClientSecurity("SSL", ssl_cafile=str(secured.ca_path), ssl_certfile=str(keystore))

    async def topics() -> list[str]:
        async with AsyncAdmin(secured.ssl_bootstrap, security=security) as admin:
            return await admin.list_topics()

    assert isinstance(trio.run(topics), list)  # connected, negotiated, answered
    secured.logged("tls.client_authenticated", '"principal": "User:sdk-client"')
    without_cert = ClientSecurity("SSL", ssl_cafile=str(secured.ca_path))

    async def refused() -> None:
        async with AsyncAdmin(secured.ssl_bootstrap, security=without_cert, request_timeout_ms=5000):
            pass

    with pytest.raises(KafkaError):
        trio.run(refused)
