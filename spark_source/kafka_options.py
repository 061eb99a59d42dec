"""Spark's Kafka options, as the raftka source and sink answer them (pure: no I/O, no Spark).

Every option of the table in Spark's "Structured Streaming + Kafka Integration
Guide" (Spark 4) is either supported by raftka or refused here with a message
naming it, and so is any other option: nothing a user passes is silently ignored.
`kafka.*` options are Kafka client settings: the source supports the consumer
settings its reads use, the sink the producer settings raftka's producer has
(options.py and sink_options.py parse their values); other ones are refused.
"""

from __future__ import annotations

from collections.abc import Mapping

SOURCE = "source"
SINK = "sink"


class KafkaOptionError(ValueError):
    """An option the raftka source or sink does not support."""


# Spark's option (as Spark spells it) -> (role -> None when supported, else why it is refused).
_NO_GROUP = ("raftka's source assigns partitions itself and keeps its offsets in Spark's "
             "checkpoint; it joins no consumer group, so there is no group id to set")
SPARK_OPTIONS: dict[str, dict[str, str | None]] = {
    "kafka.bootstrap.servers": {SOURCE: None, SINK: None},
    "assign": {SOURCE: None},
    "subscribe": {SOURCE: None},
    "subscribePattern": {SOURCE: None},
    "startingTimestamp": {SOURCE: None},
    "startingOffsetsByTimestamp": {SOURCE: None},
    "startingOffsets": {SOURCE: None},
    "endingTimestamp": {SOURCE: None},
    "endingOffsetsByTimestamp": {SOURCE: None},
    "endingOffsets": {SOURCE: None},
    "failOnDataLoss": {SOURCE: None},
    "maxOffsetsPerTrigger": {SOURCE: None},
    "minPartitions": {SOURCE: None},
    "includeHeaders": {
        SOURCE: None,
        SINK: "the sink writes the `headers` column whenever the DataFrame has one; "
              "includeHeaders is a reading option"},
    "startingOffsetsByTimestampStrategy": {SOURCE: None},  # only "latest": options.py
    "kafkaConsumer.pollTimeoutMs": {
        SOURCE: "a read task waits at most kafka.request.timeout.ms for a fetch; set that"},
    "fetchOffset.numRetries": {
        SOURCE: "the planner retries offset look-ups until kafka.request.timeout.ms; set that"},
    "fetchOffset.retryIntervalMs": {
        SOURCE: "the planner retries offset look-ups until kafka.request.timeout.ms; set that"},
    "minOffsetsPerTrigger": {
        SOURCE: "not implemented: every trigger reads what is available (up to "
                "maxOffsetsPerTrigger)"},
    "maxTriggerDelay": {
        SOURCE: "not implemented (it only applies with minOffsetsPerTrigger)"},
    "maxRecordsPerPartition": {
        SOURCE: "not implemented: use minPartitions to split offset ranges"},
    "groupIdPrefix": {SOURCE: _NO_GROUP},
    "kafka.group.id": {SOURCE: _NO_GROUP},
    "topic": {SINK: None},
    # Spark's own, given to every streaming sink.
    "checkpointLocation": {SINK: None},
    "path": {
        SOURCE: "a topic is chosen with subscribe, subscribePattern or assign, not a path",
        SINK: "a topic is chosen with the topic option or the topic column, not a path"},
}

# Kafka settings Spark itself refuses, with Spark's reason.
SPARK_REFUSED_KAFKA = {
    "kafka.auto.offset.reset": "set the source option startingOffsets instead",
    "kafka.key.deserializer": "keys are always read as bytes (cast the key column)",
    "kafka.value.deserializer": "values are always read as bytes (cast the value column)",
    "kafka.key.serializer": "keys are always written as bytes (cast the key column to "
                            "string or binary)",
    "kafka.value.serializer": "values are always written as bytes (cast the value column to "
                              "string or binary)",
    "kafka.enable.auto.commit": "the source never commits offsets to the brokers; they live "
                                "in Spark's checkpoint",
    "kafka.interceptor.classes": "Kafka's Java interceptors do not exist in raftka's Python "
                                 "clients",
    "kafka.transactional.id": "transactions are not available in raftka's Spark sink yet; "
                              "it is at-least-once (docs/spark.md)",
}

# The `kafka.*` settings each side supports (parsed by options.py / sink_options.py).
SOURCE_KAFKA = ("kafka.bootstrap.servers", "kafka.request.timeout.ms", "kafka.fetch.max.bytes",
                "kafka.max.partition.fetch.bytes", "kafka.client.id", "kafka.isolation.level")
SINK_KAFKA = ("kafka.bootstrap.servers", "kafka.acks", "kafka.enable.idempotence",
              "kafka.compression.type", "kafka.linger.ms", "kafka.batch.size",
              "kafka.buffer.memory", "kafka.retries", "kafka.retry.backoff.ms",
              "kafka.request.timeout.ms", "kafka.delivery.timeout.ms",
              "kafka.max.in.flight.requests.per.connection", "kafka.client.id")

_SPELLING = {name.lower(): name for name in SPARK_OPTIONS}


def check_options(options: Mapping[str, object], role: str) -> None:
    """Raise KafkaOptionError for the first option (in sorted order) `role` does not support."""
    supported_kafka = SOURCE_KAFKA if role == SOURCE else SINK_KAFKA
    for key in sorted(str(k).lower() for k in options):
        spelled = _SPELLING.get(key)
        if spelled is not None:
            roles = SPARK_OPTIONS[spelled]
            if role not in roles:
                other = SINK if role == SOURCE else SOURCE
                raise KafkaOptionError(
                    f"option {spelled} is a {other} option of Spark's Kafka connector; the raftka "
                    f"{role} does not take it")
            reason = roles[role]
            if reason is not None:
                raise KafkaOptionError(f"option {spelled} is not supported by the raftka {role}: "
                                       f"{reason}")
        elif key in SPARK_REFUSED_KAFKA:
            raise KafkaOptionError(f"option {key} is not supported: {SPARK_REFUSED_KAFKA[key]}")
        elif role == SOURCE and (key == "kafka.security.protocol" or key.startswith(("kafka.sasl.", "kafka.ssl."))):
            continue  # the source's security settings (spark_source/options.py::_security checks them)
        elif key.startswith("kafka."):
            if key not in supported_kafka:
                kind = "consumer" if role == SOURCE else "producer"
                raise KafkaOptionError(
                    f"option {key} is not a {kind} setting the raftka {role} supports; supported: "
                    + ", ".join(supported_kafka))
        else:
            known = sorted(n for n, roles in SPARK_OPTIONS.items()
                           if roles.get(role, "refused") is None and not n.startswith("kafka."))
            raise KafkaOptionError(
                f"option {key} is unknown to the raftka {role}; its options are "
                + ", ".join(known) + " and the kafka.* settings " + ", ".join(supported_kafka))
