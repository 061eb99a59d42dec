"""Every option of Spark's Kafka integration guide (Spark 4), for the source and the sink:
supported (parsed) or refused with a message naming it. Nothing is silently ignored."""

from __future__ import annotations

import pytest

from raftka.spark_source.kafka_options import SPARK_OPTIONS, SPARK_REFUSED_KAFKA
from raftka.spark_source.options import SourceOptionError, parse_options
from raftka.spark_source.sink_options import SinkOptionError, parse_sink_options

SOURCE_BASE = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
SINK_BASE = {"kafka.bootstrap.servers": "h:1", "topic": "t"}

# (option, a valid value, supported by the source?, supported by the sink?)
SPARK_TABLE = [
    ("assign", '{"t":[0]}', True, False),
    ("subscribe", "t", True, False),
    ("subscribePattern", "t.*", True, False),
    ("kafka.bootstrap.servers", "h:2", True, True),
    ("startingTimestamp", "1000", True, False),
    ("startingOffsetsByTimestamp", '{"t":{"0":1000}}', True, False),
    ("startingOffsets", "earliest", True, False),
    ("endingTimestamp", "1000", True, False),
    ("endingOffsetsByTimestamp", '{"t":{"0":1000}}', True, False),
    ("endingOffsets", "latest", True, False),
    ("failOnDataLoss", "false", True, False),
    ("kafkaConsumer.pollTimeoutMs", "1000", False, False),
    ("fetchOffset.numRetries", "3", False, False),
    ("fetchOffset.retryIntervalMs", "10", False, False),
    ("maxOffsetsPerTrigger", "10", True, False),  # streaming only (below)
    ("minOffsetsPerTrigger", "10", False, False),
    ("maxTriggerDelay", "15m", False, False),
    ("minPartitions", "4", True, False),
    ("maxRecordsPerPartition", "100", False, False),
    ("groupIdPrefix", "spark", False, False),
    ("kafka.group.id", "g", False, False),
    ("includeHeaders", "true", True, False),
    ("startingOffsetsByTimestampStrategy", "latest", True, False),
    ("topic", "t2", False, True),
    ("checkpointLocation", "/tmp/c", False, True),
    ("kafka.acks", "all", False, True),
    ("kafka.compression.type", "lz4", False, True),
    ("kafka.linger.ms", "10", False, True),
    ("kafka.batch.size", "65536", False, True),
    ("kafka.enable.idempotence", "true", False, True),
    ("kafka.buffer.memory", "1000000", False, True),
    ("kafka.retries", "3", False, True),
    ("kafka.retry.backoff.ms", "50", False, True),
    ("kafka.delivery.timeout.ms", "60000", False, True),
    ("kafka.max.in.flight.requests.per.connection", "2", False, True),
    ("kafka.request.timeout.ms", "5000", True, True),
    ("kafka.fetch.max.bytes", "1000000", True, False),
    ("kafka.max.partition.fetch.bytes", "100000", True, False),
    ("kafka.client.id", "me", True, True),
    ("kafka.isolation.level", "read_committed", True, False),
    ("kafka.session.timeout.ms", "1000", False, False),
    ("path", "/x", False, False),
    ("no.such.option", "1", False, False),
    *((name, "x", False, False) for name in SPARK_REFUSED_KAFKA),
]


def _source(extra: dict[str, str]) -> None:
    base = {k: v for k, v in SOURCE_BASE.items()
            if not ({"assign", "subscribepattern"} & {k.lower() for k in extra} and k == "subscribe")}
    parse_options({**base, **extra}, streaming="maxoffsetspertrigger" in {k.lower() for k in extra})


@pytest.mark.parametrize("name,value,source,sink", SPARK_TABLE, ids=[r[0] for r in SPARK_TABLE])
def test_each_option_is_supported_or_refused_by_name(name, value, source, sink) -> None:
    for parse, supported, error in ((_source, source, SourceOptionError),
                                    (lambda extra: parse_sink_options({**SINK_BASE, **extra}), sink,
                                     SinkOptionError)):
        if supported:
            parse({name: value})
            parse({name.upper(): value})  # Spark's options are case-insensitive
        else:
            with pytest.raises(error, match=name.replace(".", r"\.")) as raised:
                parse({name: value})
            assert name in str(raised.value)


def test_the_table_covers_every_option_the_code_knows() -> None:
    tested = {r[0].lower() for r in SPARK_TABLE}
    assert {n.lower() for n in SPARK_OPTIONS} <= tested


@pytest.mark.parametrize("options,producer", [
    ({}, {"acks": -1, "enable_idempotence": True}),
    ({"kafka.acks": "1"}, {"acks": 1, "enable_idempotence": False}),
    ({"kafka.acks": "all", "kafka.enable.idempotence": "false"},
     {"acks": -1, "enable_idempotence": False}),
    ({"kafka.compression.type": "ZSTD", "kafka.linger.ms": "0", "kafka.batch.size": "1048576"},
     {"compression_type": "zstd", "linger_ms": 0, "batch_size": 1048576}),
], ids=["default-idempotent", "acks-1-turns-it-off", "explicitly-off", "passed-through"])
def test_producer_settings_pass_through(options, producer) -> None:
    parsed = parse_sink_options({**SINK_BASE, **options}).producer
    assert {k: parsed[k] for k in producer} == producer


@pytest.mark.parametrize("options,message", [
    ({"kafka.acks": "2"}, "kafka.acks"),
    ({"kafka.linger.ms": "-1"}, "kafka.linger.ms"),
    ({"kafka.compression.type": "brotli"}, "kafka.compression.type"),
    ({"kafka.enable.idempotence": "yes"}, "kafka.enable.idempotence"),
    ({"kafka.enable.idempotence": "true", "kafka.max.in.flight.requests.per.connection": "6"},
     "max.in.flight"),
    ({"kafka.bootstrap.servers": ""}, "kafka.bootstrap.servers"),
    ({"topic": " "}, "topic"),
])
def test_bad_sink_values_name_the_option(options, message) -> None:
    with pytest.raises(SinkOptionError, match=message):
        parse_sink_options({**SINK_BASE, **options})


def test_batch_only_and_stream_only_source_options() -> None:
    with pytest.raises(SourceOptionError, match="maxOffsetsPerTrigger"):
        parse_options({**SOURCE_BASE, "maxOffsetsPerTrigger": "5"})
    with pytest.raises(SourceOptionError, match="startingOffsetsByTimestampStrategy"):
        parse_options({**SOURCE_BASE, "startingOffsetsByTimestampStrategy": "error"})


SECURITY = {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.username": "alice", "kafka.sasl.password": "secret"}


def test_security_settings_go_to_the_source_and_are_refused_by_the_sink_by_name() -> None:
    _source(SECURITY)  # the source's client connects with them (client/security.py)
    for name, value in SECURITY.items():
        with pytest.raises(SinkOptionError, match=name.replace(".", r"\.")):
            parse_sink_options({**SINK_BASE, name: value})
