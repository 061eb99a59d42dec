"""DescribeConfigs' include_documentation against a real `raftka server start` process: asked
for it, every config of a topic, a broker, the broker defaults, a group and a client-metrics
subscription has its text of raftka's reference (docs/configuration.md), as Kafka 4.4 gives
its own; not asked, none has one; a broker logger's is "" either way, as Kafka's (it was null
for every resource type)."""

from __future__ import annotations

from pathlib import Path

from raftka.client.protocol import ApiKey
from raftka.raft_meta.config.config_reference import documentation
from tests.compat.server_process import ServerProcess
from tests.compat.wire_client import WireConnection

DOC = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
TOPIC, BROKER, LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


def describe(conn: WireConnection, resource_type: int, name: str, include_documentation: bool) -> dict:
    response = conn.request(ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": include_documentation})
    (result,) = response.results
    assert result.error_code == 0, result
    return {c.name: c.documentation for c in result.configs}


def test_documentation_is_raftkas_reference_text_when_asked(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "server")
    server.start()
    try:
        with WireConnection(server.bootstrap) as conn:
            assert conn.create_topic("documented", 1) == 0
            altered = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
                "resource_type": CLIENT_METRICS, "resource_name": "documented-metrics", "configs": [
                    {"name": "interval.ms", "value": "1000", "config_operation": 0}]}], "validate_only": False})
            assert altered.responses[0].error_code == 0, altered
            resources = {(TOPIC, "documented"): "topic", (BROKER, "1"): "broker", (BROKER, ""): "broker",
                         (GROUP, "documented-group"): "group", (CLIENT_METRICS, "documented-metrics"): "client-metrics"}
            for (resource_type, name), kind in resources.items():
                asked = describe(conn, resource_type, name, True)
                assert asked, (resource_type, name)
                assert asked == {key: documentation(kind, key) for key in asked}, (resource_type, name)
                assert all(asked.values()), (resource_type, name)
                assert set(describe(conn, resource_type, name, False).values()) == {None}, (resource_type, name)
            loggers = describe(conn, LOGGER, "1", True)
            assert loggers and set(loggers.values()) == {""}
            assert set(describe(conn, LOGGER, "1", False).values()) == {""}
    finally:
        server.stop()
    # The text is the page's: a topic config's and a group config's rows, a server.properties
    # key's cells, and a key of Kafka's catalogue with its cells.
    for kind, key in (("topic", "retention.ms"), ("group", "consumer.session.timeout.ms")):
        assert f"| `{key}` | {documentation(kind, key)} |" in DOC, key
    assert "| `num.partitions` | `1` | an integer > 0 |" in DOC
    assert documentation("broker", "num.partitions") == "an integer > 0. Default: `1`."
    assert "| `log.cleaner.threads` | `1` | int | dynamic: stored, not acted on |" in DOC
    assert documentation("broker", "log.cleaner.threads") == (
        "Kafka's broker key (int, default `1`); in raftka: dynamic: stored, not acted on.")
