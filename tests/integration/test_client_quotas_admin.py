"""DescribeClientQuotas / AlterClientQuotas against a real one-node server, through the SDK's
Admin (confluent-kafka and kafka-python have no client-quota admin calls): the quota goes
through the controller into the metadata log, and describe matches as Kafka does."""

from __future__ import annotations

import shlex
from collections.abc import Iterator

import pytest

from raftka.client.admin import QuotaFilter
from raftka.client.blocking import Admin
from raftka.client.errors import InvalidRequestError, UnsupportedVersionError
from tests.integration.sdk_broker import one_node_server
from tests.integration.test_sdk_cli import raftka


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with one_node_server(tmp_path_factory.mktemp("quotas-admin")) as address:
        yield address


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> Iterator[Admin]:
    client = Admin(bootstrap)
    try:
        yield client
    finally:
        client.close()


def _entities(found) -> dict:
    return {tuple(sorted(entity.items(), key=lambda kv: kv[0])): values for entity, values in found}


def test_alter_then_describe_with_kafka_matching(admin: Admin) -> None:
    admin.alter_client_quotas({"user": "alice", "client-id": "p1"}, {"producer_byte_rate": 1024})
    admin.alter_client_quotas({"user": "alice"}, {"consumer_byte_rate": 2048, "request_percentage": 12.5})
    admin.alter_client_quotas({"user": None}, {"producer_byte_rate": 100})
    admin.alter_client_quotas({"ip": "192.0.2.1"}, {"connection_creation_rate": 10})

    exact = _entities(admin.describe_client_quotas([QuotaFilter("user", "alice")]))
    assert exact == {(("client-id", "p1"), ("user", "alice")): {"producer_byte_rate": 1024.0},
                     (("user", "alice"),): {"consumer_byte_rate": 2048.0, "request_percentage": 12.5}}
    strict = _entities(admin.describe_client_quotas([QuotaFilter("user", "alice")], strict=True))
    assert list(strict) == [(("user", "alice"),)]
    default = _entities(admin.describe_client_quotas([QuotaFilter("user", default=True)]))
    assert default == {(("user", None),): {"producer_byte_rate": 100.0}}
    ips = _entities(admin.describe_client_quotas([QuotaFilter("ip")]))
    assert ips == {(("ip", "192.0.2.1"),): {"connection_creation_rate": 10.0}}

    admin.alter_client_quotas({"user": "alice"}, remove=["consumer_byte_rate"])
    assert _entities(admin.describe_client_quotas([QuotaFilter("user", "alice")], strict=True)) == {
        (("user", "alice"),): {"request_percentage": 12.5}}


def test_refusals_name_what_is_wrong(admin: Admin) -> None:
    with pytest.raises(InvalidRequestError, match="Invalid configuration key bad_key"):
        admin.alter_client_quotas({"client-id": "c"}, {"bad_key": 1})
    with pytest.raises(InvalidRequestError, match="producer_byte_rate cannot be a fractional value"):
        admin.alter_client_quotas({"client-id": "c"}, {"producer_byte_rate": 1.5})
    with pytest.raises(InvalidRequestError, match="Unhandled client quota entity type: group"):
        admin.alter_client_quotas({"group": "g"}, {"producer_byte_rate": 1})
    with pytest.raises(UnsupportedVersionError, match="Unsupported entity type group"):
        admin.describe_client_quotas([QuotaFilter("group")])
    admin.alter_client_quotas({"client-id": "c"}, {"producer_byte_rate": 5}, validate_only=True)
    assert admin.describe_client_quotas([QuotaFilter("client-id", "c")]) == []


def test_raftka_configs_users_and_clients_like_kafka_configs(bootstrap: str) -> None:
    b = ["--bootstrap-server", bootstrap]
    made = raftka("configs", "alter", "--entity-type", "users", "--entity-name", "carol", "--client", "c9",
                  "--add-config", "producer_byte_rate=4096,consumer_byte_rate=8192", *b)
    assert made.returncode == 0, made.stderr
    assert "Completed updating config for user-principal 'carol', client-id 'c9'." in made.stdout
    made = raftka("configs", "alter", "--entity-type", "clients", "--entity-default",
                  "--add-config", "producer_byte_rate=1024", *b)
    assert made.returncode == 0, made.stderr
    shown = raftka("configs", "describe", "--entity-type", "users", "--entity-name", "carol", "--client", "c9", *b)
    assert shown.stdout.splitlines() == [
        "Quota configs for user-principal 'carol', client-id 'c9' are consumer_byte_rate=8192.0, "
        "producer_byte_rate=4096.0"], shown.stderr
    defaults = raftka("configs", "describe", "--entity-type", "clients", "--entity-default", *b)
    assert defaults.stdout.splitlines() == ["Quota configs for the default client-id are producer_byte_rate=1024.0"]
    refused = raftka("configs", "alter", "--entity-type", "users", "--entity-name", "carol",
                     "--add-config", "bad_key=1", *b)
    assert refused.returncode == 1 and "Invalid configuration key bad_key" in refused.stderr
    removed = raftka("configs", "alter", "--entity-type", "users", "--entity-name", "carol", "--client", "c9",
                     "--delete-config", "producer_byte_rate,consumer_byte_rate", *b)
    assert removed.returncode == 0, removed.stderr
    assert raftka("configs", "describe", "--entity-type", "users", "--entity-name", "carol", "--client", "c9",
                  *b).stdout == ""
    assert raftka("configs", "alter", "--entity-type", "clients", "--add-config", "producer_byte_rate=1",
                  *b).returncode == 2


def test_the_documented_quota_commands_run_as_shown(bootstrap: str, admin: Admin) -> None:
    from tests.integration.sdk_broker import REPO

    text = (REPO / "docs" / "operations.md").read_text()
    section = text[text.index("\n### Quotas\n"):]
    block = section[section.index("```\n") + 4:]
    lines = [line for line in block[:block.index("```")].splitlines() if line.strip()]
    assert len(lines) == 5 and all(line.startswith("raftka configs ") for line in lines)
    try:
        for line in lines:
            ran = raftka(*shlex.split(line)[1:], "--bootstrap-server", bootstrap)
            assert ran.returncode == 0, (line, ran.stderr)
        assert "Quota configs for user-principal 'alice' are consumer_byte_rate=2097152.0, " \
               "producer_byte_rate=1048576.0" in ran.stdout
        found = _entities(admin.describe_client_quotas([QuotaFilter("ip", "10.0.0.7")]))
        assert found == {(("ip", "10.0.0.7"),): {"connection_creation_rate": 20.0}}
    finally:  # the module's other tests describe alice: leave her as found
        admin.alter_client_quotas({"user": "alice"}, remove=["producer_byte_rate", "consumer_byte_rate"])
        admin.alter_client_quotas({"user": "alice", "client-id": "ingest"}, remove=["producer_byte_rate"])
        admin.alter_client_quotas({"ip": "10.0.0.7"}, remove=["connection_creation_rate"])


def test_an_ips_connection_creation_rate_closes_the_connections_over_it(bootstrap: str, admin: Admin) -> None:
    """KIP-612: with connection_creation_rate 1 for an ip (127.0.0.3, so no other test's
    connections count), Kafka's padded 10 s window admits ten new connections at once; the
    next is held unanswered and then closed."""
    from raftka.client.protocol import ApiKey
    from tests.compat.wire_client import ConnectionClosedByBroker, WireConnection

    admin.alter_client_quotas({"ip": "127.0.0.3"}, {"connection_creation_rate": 1})
    served, closed = 0, False
    try:
        for _ in range(12):
            with WireConnection(bootstrap, source_host="127.0.0.3") as conn:
                try:
                    conn.request(ApiKey.API_VERSIONS, 0, {})
                except ConnectionClosedByBroker:
                    closed = True
                    break
                served += 1
    finally:
        admin.alter_client_quotas({"ip": "127.0.0.3"}, remove=["connection_creation_rate"])
    assert closed, f"{served} connections in a row were served"
    assert 1 <= served <= 10


def test_every_broker_alters_through_the_controller_and_describes_from_its_image(tmp_path) -> None:
    """On a three-node cluster each broker's AlterClientQuotas reaches the active controller
    (over the control RPC from the two that are not it), and every broker describes the
    committed quotas from its own metadata image."""
    from raftka.client.protocol import ApiKey
    from tests.compat.wire_client import WireConnection
    from tests.integration.cluster_support import running_cluster
    from tests.support import wait_until

    with running_cluster(tmp_path, 3) as cluster:
        addresses = {node_id: node.bootstrap for node_id, node in cluster.nodes.items()}
        for node_id, address in addresses.items():  # a raw connection: this very broker answers
            with WireConnection(address) as conn:
                answer = conn.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"validate_only": False, "entries": [
                    {"entity": [{"entity_type": "user", "entity_name": f"u{node_id}"}],
                     "ops": [{"key": "producer_byte_rate", "value": 1000.0 * node_id, "remove": False}]},
                    {"entity": [{"entity_type": "user", "entity_name": f"v{node_id}"}],
                     "ops": [{"key": "nope", "value": 1.0, "remove": False}]}]})
            assert [(e.error_code, e.error_message) for e in answer.entries] == [
                (0, None), (42, "Invalid configuration key nope")]
        expected = {((("user", f"u{n}"),)): {"producer_byte_rate": 1000.0 * n} for n in addresses}
        for address in addresses.values():
            with Admin(address) as admin:
                wait_until(lambda a=admin: _entities(a.describe_client_quotas([QuotaFilter("user")])) == expected,
                           timeout=15, what=f"the quotas described by {address}")
