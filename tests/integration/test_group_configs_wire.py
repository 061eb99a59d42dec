"""Group configs (config resource type 32, KIP-848) against a real `raftka server start`
process: DescribeConfigs answers a group with no dynamic config as Kafka 4.4 does (every
group config, from its default), IncrementalAlterConfigs stores an override within the
broker's group.consumer.* bounds (and refuses one outside them with Kafka's message), and the
KIP-848 coordinator answers the group's members with the group's heartbeat interval."""

from __future__ import annotations

from raftka.client.protocol import ApiKey, ErrorCode
from tests.compat.wire_client import WireConnection
from tests.integration.test_consumer_groups_wire import join, server  # noqa: F401 (a fixture)
from tests.support import wait_until

GROUP_RESOURCE = 32
GROUP_CONFIG, DEFAULT_CONFIG = 8, 5  # Kafka's ConfigSource ids


def describe(conn: WireConnection, group: str) -> dict:
    response = conn.request(ApiKey.DESCRIBE_CONFIGS, 3, {
        "resources": [{"resource_type": GROUP_RESOURCE, "resource_name": group, "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": False})
    (result,) = response.results
    assert result.error_code == 0, result
    return {c.name: c for c in result.configs}


def alter(conn: WireConnection, group: str, **configs: str):
    response = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": GROUP_RESOURCE, "resource_name": group,
                       "configs": [{"name": k.replace("_", "."), "value": v, "config_operation": 0}
                                   for k, v in configs.items()]}],
        "validate_only": False})
    (result,) = response.responses
    return result


def test_a_groups_heartbeat_interval_override_reaches_its_members(server) -> None:  # noqa: F811
    with WireConnection(server.bootstrap) as conn:
        before = describe(conn, "cfg-group")
        assert before["consumer.heartbeat.interval.ms"].value == "5000"
        assert before["consumer.heartbeat.interval.ms"].config_source == DEFAULT_CONFIG
        assert not [c for c in before.values() if c.config_source == GROUP_CONFIG]  # none dynamic
        assert "consumer.assignor.offload.enable" not in before  # internal, as on Kafka

        refused = alter(conn, "cfg-group", consumer_heartbeat_interval_ms="16000")
        assert refused.error_code == ErrorCode.INVALID_CONFIG
        assert refused.error_message == ("consumer.heartbeat.interval.ms must be in the range 5000 to 15000 "
                                         "inclusive.")
        assert alter(conn, "cfg-group", consumer_heartbeat_interval_ms="12000").error_code == 0

        after = describe(conn, "cfg-group")["consumer.heartbeat.interval.ms"]
        assert (after.value, after.config_source) == ("12000", GROUP_CONFIG)
        assert join(conn, "m-1", group="cfg-group").heartbeat_interval_ms == 12000
        assert join(conn, "m-2", group="cfg-other").heartbeat_interval_ms == 5000  # no override: the broker's


def test_every_group_config_has_kafkas_synonyms_and_outlives_its_group(server) -> None:  # noqa: F811
    """As Kafka 4.4's createGroupConfigEntry: a key with no broker synonym names itself as its
    DEFAULT_CONFIG synonym; streams.assignor.name defaults to group.streams.assignors (sticky);
    an empty group name is INVALID_REQUEST; DeleteGroups leaves the group's configs in place."""
    with WireConnection(server.bootstrap) as conn:
        response = conn.request(ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": GROUP_RESOURCE, "resource_name": "syn-group", "configuration_keys": None}],
            "include_synonyms": True, "include_documentation": False})
        (result,) = response.results
        assert (result.error_code, result.error_message) == (0, "")
        chains = {c.name: [(s.name, s.value, s.source) for s in c.synonyms] for c in result.configs}
        assert chains["share.isolation.level"] == [("share.isolation.level", "read_uncommitted", DEFAULT_CONFIG)]
        assert chains["errors.deadletterqueue.topic.name"] == [("errors.deadletterqueue.topic.name", "",
                                                                DEFAULT_CONFIG)]
        assert chains["streams.assignor.name"] == [("group.streams.assignors", "sticky", DEFAULT_CONFIG)]
        assert {c.name: c.value for c in result.configs}["streams.assignor.name"] == "sticky"
        assert all(chains.values())  # every key has at least its default

        empty = conn.request(ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": GROUP_RESOURCE, "resource_name": "", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}).results[0]
        assert (empty.error_code, empty.error_message, empty.configs) == (
            ErrorCode.INVALID_REQUEST, "Group name must not be empty", [])

        assert alter(conn, "syn-group", consumer_session_timeout_ms="50000").error_code == 0
        wait_until(lambda: conn.find_coordinator("syn-group").error_code == 0, 30.0, what="a coordinator")
        wait_until(lambda: conn.commit_offsets("syn-group", "orders", {0: 1}) == {0: 0}, 30.0,
                   what="syn-group's offsets committed (its coordinator loaded)")
        deleted = conn.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["syn-group"]}).results[0]
        assert deleted.error_code == 0
        kept = describe(conn, "syn-group")["consumer.session.timeout.ms"]
        assert (kept.value, kept.config_source) == ("50000", GROUP_CONFIG)  # Kafka 4.4 keeps them too
