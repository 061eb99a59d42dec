"""server.properties parsing and meta.properties storage formatting."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from raftka.raft_meta.config.node_config import (
    ConfigError,
    load_node_config,
    parse_node_config,
    parse_properties,
)
from raftka.raft_meta.quorum.storage_format import (
    StorageError,
    format_storage,
    random_cluster_id,
    read_meta_properties,
    verify_storage,
)

CONTRACT = """\
node.id=1
process.roles=broker,controller
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
advertised.listeners=PLAINTEXT://127.0.0.1:9092
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293
controller.quorum.secret=config-test-s3cret
log.dirs={log_dir}
"""


def _props(tmp_path: Path, **overrides: str | None) -> dict[str, str]:
    props = parse_properties(CONTRACT.format(log_dir=tmp_path / "data"))
    for key, value in overrides.items():
        key = key.replace("_", ".")
        if value is None:
            props.pop(key, None)
        else:
            props[key] = value
    return props


def test_contract_file_is_all_a_node_needs(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("# a comment\n" + CONTRACT.format(log_dir=tmp_path / "data"))
    config = load_node_config(path, env={})
    assert config.node_id == 1 and config.is_broker and config.is_controller
    assert config.quorum_bind_address() == "127.0.0.1:9093"
    assert [v.address() for v in config.controller_quorum_voters] == ["127.0.0.1:9093", "127.0.0.1:9193", "127.0.0.1:9293"]
    assert config.controller_rpc_address(2) == ("127.0.0.1", 9194)  # derived: quorum port + 1
    assert config.metadata_log_dir == str(tmp_path / "data")
    assert config.inter_broker_listener_name == "PLAINTEXT"
    assert [e.address() for e in config.advertised()] == ["127.0.0.1:9092"]
    # Kafka defaults a user expects
    assert (config.num_partitions, config.default_replication_factor, config.min_insync_replicas) == (1, 1, 1)
    assert config.auto_create_topics_enable and config.auto_leader_rebalance_enable
    assert not config.unclean_leader_election_enable
    assert (config.broker_session_timeout_ms, config.broker_heartbeat_interval_ms) == (9000, 2000)
    assert config.replica_lag_time_max_ms == 30000 and config.offsets_topic_replication_factor == 3
    assert config.socket_request_max_bytes == 104857600
    # Listener limits: Kafka's defaults, except queued.max.request.bytes (Kafka: -1, unbounded)
    assert config.connections_max_idle_ms == 600000
    assert config.max_connections == config.max_connections_per_ip == 2**31 - 1
    assert config.max_connections_per_ip_overrides == ()
    assert config.queued_max_request_bytes == 104857600
    assert config.log_retention_ms == 168 * 3_600_000 and config.log_cleanup_policy == ("delete",)


def test_kafka_stock_keys_are_accepted(tmp_path: Path) -> None:
    props = _props(tmp_path)
    props.update({"socket.send.buffer.bytes": "102400", "num.recovery.threads.per.data.dir": "1",
                  "num.network.threads": "3", "log.retention.check.interval.ms": "300000"})
    assert parse_node_config(props, env={}).raw["socket.send.buffer.bytes"] == "102400"
    props["socket.send.buffer.bytes"] = "big"
    with pytest.raises(ConfigError, match="'socket.send.buffer.bytes': got 'big', expected an integer"):
        parse_node_config(props, env={})


def test_secret_from_environment(tmp_path: Path) -> None:
    config = parse_node_config(_props(tmp_path, controller_quorum_secret=None), env={"RAFTKA_QUORUM_SECRET": "from-the-environment"})
    assert config.controller_quorum_secret == "from-the-environment"


def test_retention_precedence(tmp_path: Path) -> None:
    props = _props(tmp_path)
    props.update({"log.retention.hours": "1", "log.retention.minutes": "2"})
    assert parse_node_config(props, env={}).log_retention_ms == 120_000
    props["log.retention.ms"] = "5"
    assert parse_node_config(props, env={}).log_retention_ms == 5


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"bogus.key": "1"}, "unknown config key 'bogus.key' (value '1')"),
        ({"node.id": "one"}, "config key 'node.id': got 'one', expected an integer"),
        ({"num.partitions": "0"}, "'num.partitions': got '0', expected an integer > 0"),
        ({"auto.create.topics.enable": "yes"}, "got 'yes', expected true or false"),
        ({"process.roles": "broker,zookeeper"}, "subset of broker,controller"),
        ({"controller.quorum.voters": "1@host"}, "expected a comma-separated list of id@host:port"),
        ({"listeners": "PLAINTEXT:/x:1"}, "NAME://host:port"),
        ({"node.id": "7"}, "node.id 7 is not among voters [1, 2, 3]"),
        ({"controller.quorum.secret": None}, "controller.quorum.secret' is missing"),
        ({"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9999"}, "port 9999 differs"),
        ({"listeners": "PLAINTEXT://127.0.0.1:9092"}, "no listener named ['CONTROLLER']"),
        ({"log.dirs": None}, "'log.dirs' is missing"),
        ({"listener.security.protocol.map": "PLAINTEXT:KERBEROS"}, "PROTOCOL one of"),
        ({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"}, "controller listener CONTROLLER"),
        ({"log.cleanup.policy": "shred"}, "delete, compact"),
        ({"max.connections.per.ip.overrides": "host.example:5"},
         "got 'host.example:5', expected a comma-separated list of ip:count"),
        ({"max.connections.per.ip.overrides": "10.0.0.1:-1"}, "expected a comma-separated list of ip:count"),
        ({"max.connections.per.ip.overrides": "10.0.0.1"}, "expected a comma-separated list of ip:count"),
        ({"max.connections.per.ip": "0"}, "'max.connections.per.ip': got 0 without max.connections.per.ip.overrides"),
        ({"queued.max.request.bytes": "0"}, "expected a number of bytes > 0, or -1 for no limit"),
        ({"connections.max.idle.ms": "0"}, "'connections.max.idle.ms': got '0', expected an integer > 0"),
        # the controller RPC port trap: quorum port + controller.rpc.port.offset
        ({"controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"},
         "voter 1's controller RPC port 127.0.0.1:9094 (its quorum port 9093 + offset 1) is also "
         "voter 2's quorum port 127.0.0.1:9094; expected quorum ports at least 2 apart"),
        ({"controller.rpc.port.offset": "100"},
         "voter 1's controller RPC port 127.0.0.1:9193 (its quorum port 9093 + offset 100) is also "
         "voter 2's quorum port"),
        ({"controller.rpc.port.offset": "-1"},
         "controller RPC port 127.0.0.1:9092 (its quorum port 9093 + offset -1) is also this node's "
         "PLAINTEXT listener port 9092"),
        # broker-only nodes (process.roles=broker): an id of their own, no controller listener
        ({"process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:9092"},
         "node.id': 1 is among controller.quorum.voters [1, 2, 3] but process.roles is 'broker'"),
        ({"process.roles": "broker", "node.id": "4"},
         "got controller listener 'CONTROLLER' on a node without the controller role"),
    ],
)
def test_bad_config_names_key_value_and_expectation(tmp_path: Path, overrides: dict, message: str) -> None:
    props = _props(tmp_path)
    for key, value in overrides.items():
        if value is None:
            props.pop(key)
        else:
            props[key] = value
    with pytest.raises(ConfigError) as info:
        parse_node_config(props, env={})
    assert message in str(info.value)


def test_a_broker_only_node_needs_no_controller_listener(tmp_path: Path) -> None:
    config = parse_node_config(_props(tmp_path, **{"process.roles": "broker", "node.id": "4",
                                                    "listeners": "PLAINTEXT://127.0.0.1:9392",
                                                    "advertised.listeners": "PLAINTEXT://127.0.0.1:9392"}), env={})
    assert config.is_broker and not config.is_controller
    assert [v.node_id for v in config.controller_quorum_voters] == [1, 2, 3]
    assert config.controller_listener() is None


def test_listener_limit_keys(tmp_path: Path) -> None:
    config = parse_node_config(_props(
        tmp_path, **{"connections.max.idle.ms": "1500", "max.connections": "100",
                     "max.connections.per.ip": "0", "queued.max.request.bytes": "-1",
                     "max.connections.per.ip.overrides": "10.0.0.1:5, [::1]:7,::ffff:10.0.0.2:0,fe80::1:3"}),
        env={})
    assert (config.connections_max_idle_ms, config.max_connections, config.max_connections_per_ip) == (1500, 100, 0)
    assert config.queued_max_request_bytes == -1
    # IPv6 with or without brackets; an IPv4-mapped address counts as its IPv4 address
    assert config.max_connections_per_ip_overrides == (("10.0.0.1", 5), ("::1", 7), ("10.0.0.2", 0), ("fe80::1", 3))


@pytest.mark.parametrize("voters", [
    "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293",   # raftka cluster up's layout
    "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097",   # 2 apart: RPC ports 9094, 9096, 9098
    "1@127.0.0.1:9093,2@10.0.0.2:9094,3@10.0.0.3:9095",     # consecutive, but on other hosts
])
def test_rpc_ports_that_cannot_collide_are_accepted(tmp_path: Path, voters: str) -> None:
    props = _props(tmp_path)
    props["controller.quorum.voters"] = voters
    parse_node_config(props, env={})


SECRET_VALUE = "hunter2-hunter2-hunter2"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        # Kafka masks the values of keys naming a password or a secret as [hidden].
        ({"controller.quorum.secrets": SECRET_VALUE}, "unknown config key 'controller.quorum.secrets' (value [hidden])"),
        ({"ssl.key.passwords": SECRET_VALUE}, "unknown config key 'ssl.key.passwords' (value [hidden])"),
        ({"controller.quorum.secret": "short"}, "the quorum secret is 5 bytes long; expected at least 16"),
    ],
)
def test_sensitive_values_are_never_printed(tmp_path: Path, lines: dict, message: str) -> None:
    props = {**_props(tmp_path), **lines}
    with pytest.raises(ConfigError) as info:
        parse_node_config(props, env={})
    assert message in str(info.value)
    assert "hunter2" not in str(info.value) and "'short'" not in str(info.value)


def test_a_short_secret_says_how_to_make_one(tmp_path: Path) -> None:
    for props, env in ((_props(tmp_path, controller_quorum_secret="0123456789abcde"), {}),
                       (_props(tmp_path, controller_quorum_secret=None), {"RAFTKA_QUORUM_SECRET": "tiny"})):
        with pytest.raises(ConfigError, match="random-uuid.*openssl rand -base64 32"):
            parse_node_config(props, env=env)
    assert parse_node_config(_props(tmp_path, controller_quorum_secret="0123456789abcdef"), env={})


def test_the_secret_stays_out_of_the_config_repr(tmp_path: Path) -> None:
    config = parse_node_config(_props(tmp_path), env={})
    assert config.controller_quorum_secret == "config-test-s3cret"
    assert "config-test-s3cret" not in repr(config)


def test_a_line_without_separator_hides_all_but_its_first_word() -> None:
    with pytest.raises(ConfigError) as info:
        parse_properties("node.id=1\ncontroller.quorum.secret " + SECRET_VALUE + "\n")
    assert str(info.value) == "line 2: 'controller.quorum.secret [hidden]': expected key=value"


def test_properties_syntax() -> None:
    assert parse_properties("a=1\n! c\nb : 2\nc=x\\\n  y\n\n") == {"a": "1", "b": "2", "c": "xy"}
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_properties("just words\n")


def test_format_then_verify(tmp_path: Path) -> None:
    props = _props(tmp_path, metadata_log_dir=str(tmp_path / "meta"))
    config = parse_node_config(props, env={})
    with pytest.raises(StorageError, match="not formatted"):
        verify_storage(config)
    cluster_id = random_cluster_id()
    assert len(cluster_id) == 22 and cluster_id != random_cluster_id()
    written = format_storage(config, cluster_id)
    assert written == [tmp_path / "data", tmp_path / "meta"]
    assert read_meta_properties(tmp_path / "meta").node_id == 1
    assert verify_storage(config) == cluster_id
    with pytest.raises(StorageError, match="already formatted"):
        format_storage(config, cluster_id)
    assert format_storage(config, cluster_id, ignore_formatted=True) == []
    with pytest.raises(StorageError, match="not valid"):
        format_storage(config, "short")


def test_verify_rejects_other_node_or_mixed_clusters(tmp_path: Path) -> None:
    config = parse_node_config(_props(tmp_path, metadata_log_dir=str(tmp_path / "meta")), env={})
    other = parse_node_config(_props(tmp_path, node_id="2", listeners="PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9193",
                                     metadata_log_dir=str(tmp_path / "meta")), env={})
    format_storage(other, random_cluster_id())
    with pytest.raises(StorageError, match="has node.id=2; expected node.id=1"):
        verify_storage(config)
    (tmp_path / "meta" / "meta.properties").unlink()
    (tmp_path / "data" / "meta.properties").unlink()
    format_storage(config, random_cluster_id())
    (tmp_path / "meta" / "meta.properties").unlink()
    from raftka.raft_meta.quorum.storage_format import MetaProperties, write_meta_properties

    write_meta_properties(tmp_path / "meta", MetaProperties(random_cluster_id(), 1))
    with pytest.raises(StorageError, match="disagree on the cluster id"):
        verify_storage(config)


@pytest.mark.parametrize(("settings", "expected"), [
    ({}, (45000, 5000, ("uniform", "range"))),  # Kafka 4.4's defaults
    ({"group.consumer.assignors": "range"}, (45000, 5000, ("range",))),
    ({"group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor, uniform"},
     (45000, 5000, ("range", "uniform"))),
    ({"group.consumer.session.timeout.ms": "60000", "group.consumer.heartbeat.interval.ms": "3000"},
     (60000, 3000, ("uniform", "range"))),
])
def test_kip848_group_configs(settings, expected):
    config = parse_node_config({**BASE_KIP848, **settings}, env={})
    assert (config.group_consumer_session_timeout_ms, config.group_consumer_heartbeat_interval_ms,
            config.group_consumer_assignors) == expected


@pytest.mark.parametrize(("settings", "message"), [
    ({"group.consumer.assignors": "sticky"}, "got 'sticky', expected a comma-separated list of uniform, range"),
    ({"group.consumer.heartbeat.interval.ms": "45000"}, "expected less than group.consumer.session.timeout.ms"),
])
def test_kip848_group_configs_refused(settings, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_node_config({**BASE_KIP848, **settings}, env={})


BASE_KIP848 = {"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
               "controller.quorum.voters": "1@127.0.0.1:9093", "log.dirs": "/tmp/x",
               "controller.quorum.secret": "config-test-s3cret"}
