"""`raftka cluster up --secure`: a local cluster with only SASL_SSL listeners, one command away.

What it sets up, under the data dir (reused by the next run):

- `tls/ca.pem` (+ `ca-key.pem`, 0600): a private CA; each node's
  `node-<i>/tls/keystore.pem` (key + chain, SANs for the host, localhost and
  127.0.0.1), so librdkafka's default host-name check passes.
- SCRAM users created with the cluster (`storage format --add-scram`'s
  bootstrap file): `admin` (SCRAM-SHA-256 and -512) for you, `broker` for the
  brokers' own replication traffic (`sasl.mechanism.inter.broker.protocol`).
  Their passwords are random, kept in `secure.properties` (0600).
- `client.properties`: Kafka client settings (`--command-config` of raftka's
  and Kafka's tools), and `settings()` prints librdkafka's and kafka-python's.

Once ACLs exist, `User:broker` and `User:admin` belong in `super.users`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from raftka.client.protocol.scram import MECHANISMS, make_credential
from raftka.client.security import ClientSecurity
from raftka.raft_meta.metadata.bootstrap_records import BOOTSTRAP_FILE, write_bootstrap
from raftka.raft_meta.metadata.records import UserScramCredential, encode_record
from raftka.testing import certs
from raftka.testing.local_cluster import LocalCluster, Node

SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";'
MECHANISM = "SCRAM-SHA-512"
PROTOCOL = "SASL_SSL"


@dataclass
class SecureSetup:
    directory: Path
    ca_path: Path
    admin_user: str
    admin_password: str
    broker_password: str

    @property
    def client_properties_path(self) -> Path:
        return self.directory / "client.properties"

    def client_security(self) -> ClientSecurity:
        return ClientSecurity(security_protocol=PROTOCOL, sasl_mechanism=MECHANISM, sasl_username=self.admin_user,
                              sasl_password=self.admin_password, ssl_cafile=str(self.ca_path))

    def client_properties(self) -> str:
        return "".join(f"{k}={v}\n" for k, v in {
            "security.protocol": PROTOCOL,
            "sasl.mechanism": MECHANISM,
            "sasl.jaas.config": SCRAM_JAAS.format(user=self.admin_user, password=self.admin_password),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_path),
        }.items())

    def settings(self, bootstrap: str) -> str:
        """The exact client settings to use, for people (printed by `cluster up --secure`)."""
        return "\n".join([
            f"Secured cluster: SASL_SSL, SCRAM users {self.admin_user!r} (SCRAM-SHA-256/512), CA {self.ca_path}",
            f"Client properties (Kafka tools, raftka --command-config): {self.client_properties_path}",
            "",
            "confluent-kafka / librdkafka:",
            f"  {{'bootstrap.servers': '{bootstrap}', 'security.protocol': 'SASL_SSL',",
            f"   'sasl.mechanism': '{MECHANISM}', 'sasl.username': '{self.admin_user}',",
            f"   'sasl.password': '{self.admin_password}', 'ssl.ca.location': '{self.ca_path}'}}",
            "kafka-python:",
            f"  KafkaProducer(bootstrap_servers='{bootstrap}', security_protocol='SASL_SSL',",
            f"      sasl_mechanism='{MECHANISM}', sasl_plain_username='{self.admin_user}',",
            f"      sasl_plain_password='{self.admin_password}', ssl_cafile='{self.ca_path}')",
            "raftka SDK:",
            f"  Producer('{bootstrap}', security=ClientSecurity.from_properties(",
            f"      read_properties_file('{self.client_properties_path}')))",
        ])


def _secrets(directory: Path) -> tuple[str, str]:
    path = directory / "secure.properties"
    if path.exists():
        values = dict(line.split("=", 1) for line in path.read_text().split() if "=" in line)
        return values["admin.password"], values["broker.password"]
    admin, broker = secrets.token_urlsafe(18), secrets.token_urlsafe(18)
    certs._write(path, f"admin.password={admin}\nbroker.password={broker}\n".encode(), private=True)
    return admin, broker


def _user_records(users: list[tuple[str, str, tuple[str, ...]]]) -> list[bytes]:
    records = []
    for name, password, mechanisms in users:
        for mechanism in mechanisms:
            cred = make_credential(mechanism, password)
            records.append(encode_record(UserScramCredential(name, MECHANISMS[mechanism][0], cred.salt,
                                                             cred.stored_key, cred.server_key, cred.iterations)))
    return records


def secure_cluster(data_dir: str | Path, nodes: int = 3, *, admin_user: str = "admin", **options) -> tuple[
        LocalCluster, SecureSetup]:
    """A LocalCluster whose only client listener is SASL_SSL, with its CA, certificates, SCRAM
    users and client.properties written under `data_dir`."""
    directory = Path(data_dir).resolve()
    tls_dir = directory / "tls"
    if (tls_dir / "ca.pem").exists():
        ca = certs.Issued(certs.x509.load_pem_x509_certificate((tls_dir / "ca.pem").read_bytes()),
                          certs.serialization.load_pem_private_key((tls_dir / "ca-key.pem").read_bytes(), None))
    else:
        ca = certs.make_ca()
        certs.write_ca(ca, tls_dir)
    admin_password, broker_password = _secrets(directory)
    setup = SecureSetup(directory, tls_dir / "ca.pem", admin_user, admin_password, broker_password)

    def node_config(node: Node) -> dict[str, str]:
        keystore = node.directory / "tls" / "keystore.pem"
        if not keystore.exists():
            hosts = tuple(dict.fromkeys([node.host, "localhost", "127.0.0.1"]))
            certs.write_keystore(certs.issue(ca, f"node-{node.node_id}", hosts=hosts, unit="brokers"), ca, keystore)
        meta = node.metadata_log_dir
        if not (meta / "meta.properties").exists() and not (meta / BOOTSTRAP_FILE).exists():
            meta.mkdir(parents=True, exist_ok=True)
            write_bootstrap(meta, _user_records([(admin_user, admin_password, ("SCRAM-SHA-256", "SCRAM-SHA-512")),
                                                 ("broker", broker_password, (MECHANISM,))]))
        return {
            "listener.security.protocol.map": f"{PROTOCOL}:{PROTOCOL},CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": PROTOCOL,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(setup.ca_path),
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            f"listener.name.{PROTOCOL.lower()}.{MECHANISM.lower()}.sasl.jaas.config":
                SCRAM_JAAS.format(user="broker", password=broker_password),
        }

    cluster = LocalCluster(directory, nodes, listener_protocol=PROTOCOL, node_config=node_config,
                           client_security=setup.client_security(), **options)
    certs._write(setup.client_properties_path, setup.client_properties().encode(), private=True)
    return cluster, setup


