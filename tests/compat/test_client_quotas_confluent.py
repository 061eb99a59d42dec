"""A client quota holds a real librdkafka producer to its rate (KIP-13 / KIP-219), against a
real raftka server process with Kafka's default quota windows.

`producer_byte_rate` is set for the producer's client id through AlterClientQuotas. The
producer then sends as fast as librdkafka lets it for a bounded run. What is asserted is
the quota's promise, computed from the acknowledgements: at every ack, the bytes
acknowledged so far are at most `rate x (elapsed + the sampled window)` plus one request
(Kafka's Rate lets a new client use the whole window before it throttles). The broker must
also have said so: librdkafka's statistics count the throttled responses.
"""

from __future__ import annotations

import json
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from raftka.client.admin import NewTopic  # noqa: E402
from raftka.client.blocking import Admin  # noqa: E402

RATE = 100_000  # producer_byte_rate, bytes/s
WINDOW_S = 11  # quota.window.num (11) x quota.window.size.seconds (1): Kafka's defaults
RUN_S = 14  # past one whole window, so the steady state is held to the rate too
VALUE = b"q" * 1000
BATCH_BYTES = 16384  # batch.size: one request carries at most one batch for the one partition
CLIENT_ID = "cf-quota-producer"


def test_a_librdkafka_producer_is_held_to_its_producer_byte_rate(bootstrap: str) -> None:
    topic = "cf-quota"
    admin = Admin(bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.alter_client_quotas({"client-id": CLIENT_ID}, {"producer_byte_rate": RATE})
        acks: list[tuple[float, int]] = []
        errors: list = []
        throttled = []

        def delivered(err, msg) -> None:
            if err is not None:
                errors.append(err)
            else:
                acks.append((time.monotonic(), len(msg.value())))

        def stats(text: str) -> None:
            for broker in json.loads(text).get("brokers", {}).values():
                throttled.append(broker.get("throttle", {}).get("cnt", 0))

        producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "client.id": CLIENT_ID, "acks": 1, "linger.ms": 5,
            "batch.size": BATCH_BYTES, "compression.type": "none", "statistics.interval.ms": 1000,
            # a short local queue, so what is queued at the end flushes within the quota
            "queue.buffering.max.kbytes": 64, "queue.buffering.max.messages": 64,
            "stats_cb": stats})
        start = time.monotonic()
        while time.monotonic() - start < RUN_S:  # a bounded run, not a timing assertion
            try:
                producer.produce(topic, VALUE, on_delivery=delivered)
            except BufferError:  # the local queue is full: the broker is holding us back
                producer.poll(0.05)
            producer.poll(0)
        assert producer.flush(60) == 0
    finally:
        admin.alter_client_quotas({"client-id": CLIENT_ID}, remove=["producer_byte_rate"])
        admin.close()

    assert not errors, errors[:3]
    total = 0
    worst = 0.0
    for at, nbytes in acks:
        total += nbytes
        allowed = RATE * (at - start + WINDOW_S) + 4 * BATCH_BYTES  # + the requests in flight
        worst = max(worst, total / allowed)
        assert total <= allowed, (f"{total} bytes acknowledged {at - start:.2f}s in; the quota allows "
                                  f"{allowed:.0f} ({RATE} B/s over the elapsed time and a {WINDOW_S}s window)")
    assert total >= RATE * 5, f"only {total} bytes acknowledged in {RUN_S}s: the producer barely ran"
    assert max(throttled, default=0) > 0, "the broker never answered with a throttle time"


@pytest.mark.parametrize("acks", [1, -1])  # -1: the answer waits for the ISR (a deferred answer)
def test_a_client_that_ignores_the_throttle_is_muted_for_it(bootstrap: str, acks: int) -> None:
    """KIP-219: the throttled response comes back at once with `throttle_time_ms`, and the
    broker reads nothing more from the connection for that long, so a client that sends its
    next request straight away is answered only after the throttle time."""
    from raftka.client.protocol import ApiKey
    from tests.compat.wire_client import WireConnection, values_batch

    client_id, topic = f"x-quota-ignorer{acks}", f"x-quota-mute{acks}"
    admin = Admin(bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.alter_client_quotas({"client-id": client_id}, {"producer_byte_rate": 10_000})
        with WireConnection(bootstrap, client_id=client_id) as conn:
            batch = values_batch([b"m" * 1000] * 120)  # 120 KB: 12 KB/s over the padded 10 s window
            sent = time.monotonic()
            first = conn.request(ApiKey.PRODUCE, 8, {
                "transactional_id": None, "acks": acks, "timeout_ms": 15000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
            assert first.responses[0].partition_responses[0].error_code == 0
            assert first.throttle_time_ms > 0, "a request over the quota must carry a throttle time"
            conn.request(ApiKey.API_VERSIONS, 0, {})  # sent at once, ignoring the throttle
            answered = time.monotonic()
    finally:
        admin.alter_client_quotas({"client-id": client_id}, remove=["producer_byte_rate"])
        admin.close()
    # The broker muted the connection for throttle_time_ms from its handling of the first
    # request, which came after `sent`: the second answer cannot come sooner.
    assert answered - sent >= first.throttle_time_ms / 1000.0


def test_a_librdkafka_consumer_is_held_to_its_consumer_byte_rate(bootstrap: str) -> None:
    """The same promise for `consumer_byte_rate`: a consumer Fetch's response bytes count, and
    at every poll the bytes consumed so far are at most `rate x (elapsed + the sampled
    window)` plus the fetches librdkafka may hold ahead of the application."""
    topic, client_id = "cf-quota-consume", "cf-quota-consumer"
    produced = 6_000_000  # more than the quota lets through in the run: rate x (RUN_S + WINDOW_S)
    fetch_bytes = 65536
    admin = Admin(bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                                             "batch.size": BATCH_BYTES})  # a fetch holds whole batches
        for _ in range(produced // len(VALUE)):
            while True:
                try:
                    producer.produce(topic, VALUE)
                    break
                except BufferError:
                    producer.poll(0.05)
        assert producer.flush(60) == 0
        admin.alter_client_quotas({"client-id": client_id}, {"consumer_byte_rate": RATE})
        throttled: list[int] = []

        def stats(text: str) -> None:
            for broker in json.loads(text).get("brokers", {}).values():
                throttled.append(broker.get("throttle", {}).get("cnt", 0))

        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "client.id": client_id, "group.id": "cf-quota-group",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.max.bytes": fetch_bytes,
            "max.partition.fetch.bytes": fetch_bytes, "message.max.bytes": fetch_bytes,
            "statistics.interval.ms": 1000, "stats_cb": stats})
        consumed: list[tuple[float, int]] = []
        try:
            consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
            start = time.monotonic()
            while time.monotonic() - start < RUN_S:  # a bounded run, not a timing assertion
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    consumed.append((time.monotonic(), len(message.value())))
        finally:
            consumer.close()
    finally:
        admin.alter_client_quotas({"client-id": client_id}, remove=["consumer_byte_rate"])
        admin.close()

    total = 0
    for at, nbytes in consumed:
        total += nbytes
        allowed = RATE * (at - start + WINDOW_S) + 4 * fetch_bytes  # + fetches held ahead
        assert total <= allowed, (f"{total} bytes consumed {at - start:.2f}s in; the quota allows "
                                  f"{allowed:.0f} ({RATE} B/s over the elapsed time and a {WINDOW_S}s window)")
    assert total >= RATE * 5, f"only {total} bytes consumed in {RUN_S}s: the consumer barely ran"
    assert max(throttled, default=0) > 0, "the broker never answered a fetch with a throttle time"


def test_a_throttled_sessionless_fetch_is_answered_empty(bootstrap: str) -> None:
    """As Kafka: a Fetch over `consumer_byte_rate` without a fetch session (librdkafka's kind)
    comes back at once with `throttle_time_ms` and no records."""
    from raftka.client.protocol import ApiKey
    from tests.compat.wire_client import WireConnection, values_batch

    client_id, topic = "x-quota-fetcher", "x-quota-fetch"
    admin = Admin(bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        with WireConnection(bootstrap) as conn:
            assert conn.produce(topic, 0, values_batch([b"f" * 1000] * 50)).error_code == 0
            unthrottled = conn.request(ApiKey.FETCH, 11, conn.fetch_request_body(topic, 0, 0))
            assert unthrottled.throttle_time_ms == 0 and len(unthrottled.responses) == 1
        admin.alter_client_quotas({"client-id": client_id}, {"consumer_byte_rate": 4000})
        with WireConnection(bootstrap, client_id=client_id) as conn:
            body = conn.fetch_request_body(topic, 0, 0)
            assert body["session_epoch"] == -1
            throttled = conn.request(ApiKey.FETCH, 11, body)  # 50 KB: 5 KB/s over the padded 10 s window
            assert throttled.throttle_time_ms > 0 and throttled.responses == []
    finally:
        admin.alter_client_quotas({"client-id": client_id}, remove=["consumer_byte_rate"])
        admin.close()
