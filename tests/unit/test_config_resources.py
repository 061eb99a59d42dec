"""Table tests of the config resources beyond topics and brokers: client-metrics subscriptions
(KIP-714; validation and the controller's records), ListConfigResources' answer, and the
broker's logger levels (BROKER_LOGGER)."""

from __future__ import annotations

import logging

import pytest
import structlog

from raftka.broker.handlers.alter_configs import alter_logger_levels
from raftka.broker.handlers.describe_configs import broker_id_error, client_metrics_entries
from raftka.broker.handlers.list_config_resources import list_resources
from raftka.broker.logger_levels import (
    LoggerLevels,
    NamedPrintLoggerFactory,
    drop_below_level,
    logger_name,
)
from raftka.client.protocol import ErrorCode
from raftka.raft_meta.config.client_metrics_configs import ClientMetricsConfigError, validate
from raftka.raft_meta.controller.config_decisions import (
    APPEND,
    CLIENT_METRICS,
    DELETE,
    SET,
    SUBTRACT,
    AlterResource,
    ConfigOp,
    alter_configs,
)
from raftka.raft_meta.metadata.records import Config, Topic
from tests.unit.test_raft_meta_controller import cluster, commit

# -- client-metrics validation (Kafka 4.4's ClientMetricsConfigs.validate) -------------------

VALID = [
    ({"metrics": "org.apache.kafka.producer., *"}, {"metrics": "org.apache.kafka.producer.,*"}),
    ({"interval.ms": " 100"}, {"interval.ms": "100"}),
    ({"interval.ms": "3600000"}, {"interval.ms": "3600000"}),
    ({"match": "client_id=a.*, client_software_name=librdkafka"},
     {"match": "client_id=a.*,client_software_name=librdkafka"}),
    ({"metrics": ""}, {"metrics": ""}),
    ({}, {}),
]


@pytest.mark.parametrize(("given", "stored"), VALID)
def test_valid_subscriptions_are_normalised(given: dict, stored: dict) -> None:
    assert validate("sub", given) == stored


INVALID = [
    ("", {}, ErrorCode.INVALID_REQUEST, "Subscription name can't be empty"),
    ("s", {"color": "red"}, ErrorCode.INVALID_REQUEST, "Unknown client metrics configuration: color"),
    ("s", {"interval.ms": "99"}, ErrorCode.INVALID_REQUEST,
     "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
    ("s", {"interval.ms": "3600001"}, ErrorCode.INVALID_REQUEST, "interval must be between 100 and 3600000"),
    ("s", {"interval.ms": "1e3"}, ErrorCode.INVALID_CONFIG, "Not a number of type INT"),
    ("s", {"interval.ms": "2147483648"}, ErrorCode.INVALID_CONFIG, "Not a number of type INT"),
    ("s", {"metrics": "a,b,a"}, ErrorCode.INVALID_CONFIG, "Configuration 'metrics' values must not be duplicated."),
    ("s", {"match": "client_id"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id"),
    ("s", {"match": "client_id=a=b"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id=a=b"),
    ("s", {"match": "client_rack=a"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_rack=a"),
    ("s", {"match": "client_id=[a"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id=[a"),
    # the type error of one key is found before the range of another (ConfigDef.parse first)
    ("s", {"interval.ms": "5", "metrics": "a,a"}, ErrorCode.INVALID_CONFIG, "must not be duplicated"),
]


@pytest.mark.parametrize(("name", "given", "code", "text"), INVALID)
def test_invalid_subscriptions_are_refused_like_kafka(name: str, given: dict, code: int, text: str) -> None:
    with pytest.raises(ClientMetricsConfigError) as caught:
        validate(name, given)
    assert caught.value.code == code and text in caught.value.message


def _sub(*ops: ConfigOp, name: str = "sub", incremental: bool = True) -> AlterResource:
    return AlterResource(CLIENT_METRICS, name, tuple(ops), incremental)


# (name, stored configs, resource, expected records, expected error name)
DECISIONS = [
    ("a new subscription", {}, _sub(ConfigOp("interval.ms", "1000"), ConfigOp("metrics", "a.")),
     [Config(CLIENT_METRICS, "sub", "interval.ms", "1000"), Config(CLIENT_METRICS, "sub", "metrics", "a.")], None),
    ("append starts from the empty default", {"metrics": "a."}, _sub(ConfigOp("metrics", "b.", APPEND)),
     [Config(CLIENT_METRICS, "sub", "metrics", "a.,b.")], None),
    ("subtract the last prefix deletes the key", {"metrics": "a."}, _sub(ConfigOp("metrics", "a.", SUBTRACT)),
     [Config(CLIENT_METRICS, "sub", "metrics", None)], None),
    ("append to the int key", {}, _sub(ConfigOp("interval.ms", "5", APPEND)), [], "INVALID_CONFIG"),
    ("delete a key", {"metrics": "a.", "interval.ms": "200"}, _sub(ConfigOp("interval.ms", None, DELETE)),
     [Config(CLIENT_METRICS, "sub", "interval.ms", None)], None),
    ("legacy AlterConfigs replaces the set", {"metrics": "a."}, _sub(ConfigOp("match", "client_id=x"),
                                                                     incremental=False),
     [Config(CLIENT_METRICS, "sub", "metrics", None), Config(CLIENT_METRICS, "sub", "match", "client_id=x")], None),
    ("a bad interval writes nothing", {}, _sub(ConfigOp("interval.ms", "10")), [], "INVALID_REQUEST"),
    ("the empty name", {}, _sub(ConfigOp("interval.ms", "1000"), name=""), [], "INVALID_REQUEST"),
]


@pytest.mark.parametrize(("name", "stored", "resource", "records", "error"), DECISIONS, ids=[d[0] for d in DECISIONS])
def test_client_metrics_decisions(name: str, stored: dict, resource: AlterResource, records: list,
                                  error: str | None) -> None:
    image = cluster(*[Config(CLIENT_METRICS, "sub", k, v) for k, v in stored.items()])
    decision, errors = alter_configs(image, [resource])
    assert list(decision.records) == records
    assert (errors[0].name if errors else None) == error
    after = commit(image, decision)  # the image accepts the records (apply.py knows the type)
    if records:
        assert after.configs.get((CLIENT_METRICS, resource.resource_name)) != stored


def test_client_metrics_describe_shows_defaults_and_own_values() -> None:
    entries = {e["name"]: e for e in client_metrics_entries({"interval.ms": "1000"})}
    assert sorted(entries) == ["interval.ms", "match", "metrics"]
    assert (entries["interval.ms"]["value"], entries["interval.ms"]["config_source"]) == ("1000", 7)
    assert entries["interval.ms"]["synonyms"] == [{"name": "interval.ms", "value": "1000", "source": 7}]
    assert (entries["metrics"]["value"], entries["metrics"]["config_source"], entries["metrics"]["synonyms"]) == (
        "", 5, [])
    assert (entries["interval.ms"]["config_type"], entries["match"]["config_type"]) == (3, 7)  # INT, LIST


# -- ListConfigResources ---------------------------------------------------------------------

def _listing_image():
    return cluster(Topic("b-topic", "tb"), Topic("a-topic", "ta"), Config(CLIENT_METRICS, "sub-2", "metrics", "x"),
                   Config(CLIENT_METRICS, "sub-1", "metrics", "y"), Config("broker", "1", "log.cleaner.threads", "2"))


LISTINGS = [
    ("v0: client metrics only", 0, [], (0, [("sub-1", 16), ("sub-2", 16)])),
    ("v1, none asked: every type, in Kafka's order", 1, [],
     (0, [("sub-1", 16), ("sub-2", 16), ("1", 8), ("2", 8), ("1", 4), ("2", 4), ("a-topic", 2), ("b-topic", 2)])),
    ("v1, topics", 1, [2], (0, [("a-topic", 2), ("b-topic", 2)])),
    ("v1, groups (none stored)", 1, [32], (0, [])),
    ("v1, an unsupported type fails the request", 1, [2, 1], (ErrorCode.UNSUPPORTED_VERSION, [])),
    ("v0 cannot ask for topics", 0, [2], (ErrorCode.UNSUPPORTED_VERSION, [])),
]


@pytest.mark.parametrize(("name", "version", "asked", "expected"), LISTINGS, ids=[c[0] for c in LISTINGS])
def test_list_config_resources(name: str, version: int, asked: list[int], expected) -> None:
    error, resources = list_resources(_listing_image(), [1, 2], version, asked)
    assert (error, [(r["resource_name"], r["resource_type"]) for r in resources]) == expected


# -- broker loggers ----------------------------------------------------------------------------

def test_levels_are_inherited_from_the_nearest_ancestor() -> None:
    levels = LoggerLevels(logging.INFO)
    levels.register("raftka.broker.admin")
    levels.register("raftka.raft_meta.quorum")
    assert levels.loggers() == {"root": "INFO", "raftka.broker.admin": "INFO", "raftka.raft_meta.quorum": "INFO"}
    levels.set_level("raftka.broker", "warn")
    assert levels.effective("raftka.broker.admin") == logging.WARNING
    assert levels.effective("raftka.brokerage") == logging.INFO  # a dotted ancestor, not a prefix
    levels.set_level("raftka.broker.admin", "TRACE")
    assert levels.loggers()["raftka.broker.admin"] == "TRACE"
    levels.unset("raftka.broker.admin")
    assert levels.loggers()["raftka.broker.admin"] == "WARN"
    levels.set_level("root", "ERROR")
    assert levels.loggers()["raftka.raft_meta.quorum"] == "ERROR"
    assert levels.loggers()["raftka.broker.admin"] == "WARN"


def test_level_refusals_are_kafkas() -> None:
    levels = LoggerLevels()
    with pytest.raises(Exception, match="Removing the log level of the root logger is not allowed"):
        levels.unset("root")
    with pytest.raises(Exception, match="as it is not a supported log level. Valid log levels are DEBUG, ERROR, "
                                        "FATAL, INFO, TRACE, WARN"):
        levels.set_level("raftka", "VERBOSE")


ALTERS = [
    ("set and unset", "1", [("raftka.x", "DEBUG", SET), ("raftka.y", None, DELETE)], (0, None), "DEBUG"),
    ("one bad level: nothing applied", "1", [("raftka.x", "DEBUG", SET), ("raftka.y", "LOUD", SET)],
     (ErrorCode.INVALID_CONFIG, "Cannot set the log level of raftka.y to LOUD"), "INFO"),
    ("root cannot be unset", "1", [("raftka.x", "DEBUG", SET), ("root", None, DELETE)],
     (ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed"), "INFO"),
    ("append", "1", [("raftka.x", "DEBUG", APPEND)],
     (ErrorCode.INVALID_REQUEST, "APPEND operation is not allowed for the BROKER_LOGGER resource"), "INFO"),
    ("another node", "2", [("raftka.x", "DEBUG", SET)],
     (ErrorCode.INVALID_REQUEST, "Unexpected node id. Expected 1, but received 2"), "INFO"),
    ("not a node id", "", [("raftka.x", "DEBUG", SET)],
     (ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: "), "INFO"),
]


@pytest.mark.parametrize(("name", "node", "ops", "answer", "after"), ALTERS, ids=[a[0] for a in ALTERS])
def test_alter_logger_levels(name: str, node: str, ops, answer, after: str) -> None:
    levels = LoggerLevels()
    code, message = alter_logger_levels(levels, 1, node, ops, validate_only=False)
    assert code == answer[0] and (message or "").startswith(answer[1] or "")
    assert levels.loggers().get("raftka.x", "INFO") == after


def test_validate_only_changes_nothing() -> None:
    levels = LoggerLevels()
    assert alter_logger_levels(levels, 1, "1", [("raftka.x", "ERROR", SET)], validate_only=True) == (0, None)
    assert "raftka.x" not in levels.loggers()


@pytest.mark.parametrize(("name", "node", "error"), [
    ("1", 1, None), ("", 1, "Broker id must not be empty"),
    ("one", 1, "Broker id must be an integer, but it is: one"),
    ("2", 1, "Unexpected broker id, expected 1 but received 2")])
def test_broker_logger_resource_names(name: str, node: int, error: str | None) -> None:
    assert broker_id_error(name, node) == error


def test_structlog_events_are_dropped_under_their_loggers_level(monkeypatch) -> None:
    import io

    from raftka.broker import logger_levels

    levels = LoggerLevels(logging.INFO)
    monkeypatch.setattr(logger_levels, "LEVELS", levels)
    out = io.StringIO()
    logger = NamedPrintLoggerFactory(file=out, levels=levels)("broker.admin")
    assert logger_name("broker.admin") == "raftka.broker.admin" == logger.raftka_name
    assert "raftka.broker.admin" in levels.loggers()
    assert drop_below_level(logger, "info", {"event": "e"}) == {"event": "e"}
    with pytest.raises(structlog.DropEvent):
        drop_below_level(logger, "debug", {"event": "e"})
    levels.set_level("raftka.broker.admin", "ERROR")
    with pytest.raises(structlog.DropEvent):
        drop_below_level(logger, "warning", {"event": "e"})
    assert drop_below_level(logger, "error", {"event": "e"}) == {"event": "e"}
