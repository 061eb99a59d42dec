"""The config resources beyond topics and brokers, on the wire against a real broker process:
ListConfigResources (API 74), client-metrics subscriptions (type 16) and the broker's logger
levels (type 8). confluent-kafka's AdminClient knows neither type, so the requests are built
with raftka's codec (tests/compat/wire_client.py); Kafka's own tools run them in the
differential suite (client-metrics.*, configs.broker-loggers.describe)."""

from __future__ import annotations

import pytest

from raftka.client.protocol import ApiKey
from tests.compat.server_process import ServerProcess
from tests.compat.wire_client import WireConnection
from tests.support import wait_until

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE, APPEND = 0, 1, 2
INVALID_CONFIG, INVALID_REQUEST, UNSUPPORTED_VERSION = 40, 42, 35
NODE = "1"


@pytest.fixture
def wire(server: ServerProcess):
    with WireConnection(server.bootstrap) as connection:
        yield connection


def _alter(wire: WireConnection, resource_type: int, name: str, ops: list[tuple[str, str | None, int]],
           validate_only: bool = False) -> tuple[int, str | None]:
    answer = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configs": [
            {"name": key, "config_operation": op, "value": value} for key, value, op in ops]}],
        "validate_only": validate_only})
    return answer.responses[0].error_code, answer.responses[0].error_message


def _describe(wire: WireConnection, resource_type: int, name: str) -> tuple[int, dict]:
    answer = wire.request(ApiKey.DESCRIBE_CONFIGS, 3, {"resources": [
        {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True})
    result = answer.results[0]
    return result.error_code, {c.name: (c.value, c.config_source) for c in result.configs}


def _listed(wire: WireConnection, version: int, types: list[int]) -> tuple[int, list[tuple[int, str]]]:
    answer = wire.request(ApiKey.LIST_CONFIG_RESOURCES, version, {"resource_types": types})
    return answer.error_code, [(getattr(r, "resource_type", CLIENT_METRICS), r.resource_name)
                               for r in answer.config_resources]


def test_client_metrics_subscription_is_stored_described_and_listed(wire: WireConnection) -> None:
    assert _alter(wire, CLIENT_METRICS, "cm-sub", [("metrics", "org.apache.kafka.producer.", SET),
                                                   ("interval.ms", "1000", SET),
                                                   ("match", "client_id=cm-.*", SET)]) == (0, None)
    error, configs = _describe(wire, CLIENT_METRICS, "cm-sub")
    assert error == 0
    assert configs == {"metrics": ("org.apache.kafka.producer.", 7), "interval.ms": ("1000", 7),
                       "match": ("client_id=cm-.*", 7)}
    assert _describe(wire, CLIENT_METRICS, "cm-none") == (0, {"metrics": ("", 5), "interval.ms": ("300000", 5),
                                                              "match": ("", 5)})
    assert (CLIENT_METRICS, "cm-sub") in _listed(wire, 1, [CLIENT_METRICS])[1]
    assert (CLIENT_METRICS, "cm-sub") in _listed(wire, 0, [])[1]
    # APPEND to a list key, DELETE back to the default
    assert _alter(wire, CLIENT_METRICS, "cm-sub", [("metrics", "org.apache.kafka.consumer.", APPEND),
                                                   ("interval.ms", None, DELETE)]) == (0, None)
    _, configs = _describe(wire, CLIENT_METRICS, "cm-sub")
    assert configs["metrics"] == ("org.apache.kafka.producer.,org.apache.kafka.consumer.", 7)
    assert configs["interval.ms"] == ("300000", 5)
    # every key deleted: the subscription is gone from the list
    assert _alter(wire, CLIENT_METRICS, "cm-sub", [("metrics", None, DELETE), ("match", None, DELETE)]) == (0, None)
    assert (CLIENT_METRICS, "cm-sub") not in _listed(wire, 1, [CLIENT_METRICS])[1]


@pytest.mark.parametrize(("ops", "code", "text"), [
    ([("interval.ms", "50", SET)], INVALID_REQUEST, "interval must be between 100 and 3600000"),
    ([("interval.ms", "soon", SET)], INVALID_CONFIG, "Not a number of type INT"),
    ([("match", "client_color=red", SET)], INVALID_CONFIG, "Illegal client matching pattern: client_color=red"),
    ([("match", "client_id=(", SET)], INVALID_CONFIG, "Illegal client matching pattern"),
    ([("metrics", "a,a", SET)], INVALID_CONFIG, "must not be duplicated"),
    ([("no.such", "1", SET)], INVALID_REQUEST, "Unknown client metrics configuration: no.such"),
])
def test_client_metrics_refusals_are_kafkas(wire: WireConnection, ops, code: int, text: str) -> None:
    error, message = _alter(wire, CLIENT_METRICS, "cm-bad", ops)
    assert error == code and text in message
    assert (CLIENT_METRICS, "cm-bad") not in _listed(wire, 1, [CLIENT_METRICS])[1]


def test_list_config_resources_types_and_refusal(wire: WireConnection) -> None:
    wire.create_topic("cm-list-topic")
    error, listed = _listed(wire, 1, [])
    assert error == 0
    assert (BROKER, NODE) in listed and (BROKER_LOGGER, NODE) in listed and (TOPIC, "cm-list-topic") in listed
    assert _listed(wire, 1, [TOPIC, 3]) == (UNSUPPORTED_VERSION, [])  # 3 is no supported type
    assert _listed(wire, 1, [BROKER]) == (0, [(BROKER, NODE)])


def test_broker_logger_levels_change_at_run_time(wire: WireConnection, server: ServerProcess) -> None:
    assert _alter(wire, CLIENT_METRICS, "cm-log-first", [("interval.ms", "1000", SET)]) == (0, None)
    error, loggers = _describe(wire, BROKER_LOGGER, NODE)
    assert error == 0 and loggers["root"] == ("INFO", 6)
    assert loggers["raftka.broker.admin"] == ("INFO", 6)  # it has logged (configs.altered)
    # broker.admin logs configs.altered at INFO: silenced by WARN on its parent, back after DELETE
    assert _alter(wire, BROKER_LOGGER, NODE, [("raftka.broker", "WARN", SET)]) == (0, None)
    assert _describe(wire, BROKER_LOGGER, NODE)[1]["raftka.broker"] == ("WARN", 6)
    assert _alter(wire, CLIENT_METRICS, "cm-log-silenced", [("interval.ms", "1000", SET)]) == (0, None)
    assert _alter(wire, BROKER_LOGGER, NODE, [("raftka.broker", None, DELETE)]) == (0, None)
    assert _alter(wire, CLIENT_METRICS, "cm-log-heard", [("interval.ms", "1000", SET)]) == (0, None)
    # The broker's log reaches its file after the answer: wait for the line logged last.
    wait_until(lambda: "cm-log-heard" in {e.get("resource_name") for e in server.log_events("configs.altered")},
               30, what="configs.altered for cm-log-heard in the broker's log")
    names = {e.get("resource_name") for e in server.log_events("configs.altered")}
    assert "cm-log-silenced" not in names
    assert _describe(wire, BROKER_LOGGER, NODE)[1].get("raftka.broker", ("INFO", 6)) == ("INFO", 6)


@pytest.mark.parametrize(("name", "ops", "code", "text"), [
    (NODE, [("raftka.broker", "LOUD", SET)], INVALID_CONFIG, "not a supported log level"),
    (NODE, [("root", None, DELETE)], INVALID_REQUEST, "Removing the log level of the root logger is not allowed"),
    (NODE, [("raftka.broker", "INFO", APPEND)], INVALID_REQUEST, "APPEND operation is not allowed"),
    ("7", [("raftka.broker", "INFO", SET)], INVALID_REQUEST, "Unexpected node id. Expected 1, but received 7"),
])
def test_broker_logger_refusals_are_kafkas(wire: WireConnection, name: str, ops, code: int, text: str) -> None:
    error, message = _alter(wire, BROKER_LOGGER, name, ops)
    assert error == code and text in message


def test_broker_logger_describe_names_this_broker_only(wire: WireConnection) -> None:
    answer = wire.request(ApiKey.DESCRIBE_CONFIGS, 3, {"resources": [
        {"resource_type": BROKER_LOGGER, "resource_name": "7", "configuration_keys": None}], "include_synonyms": False})
    assert answer.results[0].error_code == INVALID_REQUEST
    assert answer.results[0].error_message == "Unexpected broker id, expected 1 but received 7"
