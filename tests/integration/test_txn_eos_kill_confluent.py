"""confluent-kafka (librdkafka) consume-transform-produce across a kill -9 of the transaction
coordinator's node, then of the group coordinator's, each between send_offsets_to_transaction
and commit_transaction: every input appears exactly once in the output read with
read_committed, and the group's committed offset is the end of the input (issue #16). The loop handles errors as librdkafka's docs prescribe: a retriable commit
error is retried, anything else aborts what can be aborted and re-creates the producer and
the consumer (init_transactions fences the old producer; the new consumer resumes from the
group's committed offsets, which only a committed transaction moves)."""

from __future__ import annotations

import queue
import threading
import time
import warnings

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.integration.cluster_support import (
    bootstrap_of,
    create_topic,
    partition_info,
    running_cluster,
)

TIMEOUT = 60.0
HUNG_SLACK_S = 30.0  # past TIMEOUT, before a call is deemed hung
SOURCE = "eos-in"
SINK = "eos-out"
GROUP = "eos-group"
TID = "eos-tid"
INPUTS = 60
BATCH = 6
ABORT_BATCH = 1  # the second transaction is aborted on purpose: its outputs are in the log
KILL_BATCH = 3  # the coordinator's node is killed between send_offsets and commit of this one
GROUP_KILL_BATCH = 6  # then the group coordinator's (__consumer_offsets leader's) node, the same way


def _consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})


def _clients(bootstrap: str) -> tuple[Producer, Consumer]:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": TID,
                         "transaction.timeout.ms": 20000})
    producer.init_transactions(TIMEOUT)
    consumer = _consumer(bootstrap, GROUP)
    consumer.subscribe([SOURCE])
    return producer, consumer


class HungClient(Exception):
    """A librdkafka call did not return within its own timeout."""


def _send_offsets(producer: Producer, offsets: list[TopicPartition], consumer: Consumer) -> None:
    """send_offsets_to_transaction, bounded. librdkafka (2.16.0 here; its master too) does not
    enforce this call's timeout once it looks the group coordinator up: when FindCoordinator
    answers COORDINATOR_NOT_AVAILABLE three times (0.3 s of retries, as while __consumer_offsets-0
    has no leader, or a fenced one), the lookup waits for some broker connection to change state,
    which may never come (confluentinc/librdkafka#5456), and the call blocks in C where no signal
    reaches it. So it runs in a daemon thread; past its timeout the producer is deemed hung."""
    outcome: queue.Queue[BaseException | None] = queue.Queue()
    group_metadata = consumer.consumer_group_metadata()

    def call() -> None:
        try:
            producer.send_offsets_to_transaction(offsets, group_metadata, TIMEOUT)
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            outcome.put(exc)
        else:
            outcome.put(None)

    threading.Thread(target=call, name="send_offsets_to_transaction", daemon=True).start()
    try:
        error = outcome.get(timeout=TIMEOUT + HUNG_SLACK_S)
    except queue.Empty:
        raise HungClient(f"send_offsets_to_transaction did not return within its {TIMEOUT}s timeout") from None
    if error is not None:
        raise error


def _close(producer: Producer, consumer: Consumer) -> None:
    try:
        producer.abort_transaction(10)
    except KafkaException:
        pass  # nothing open, or fatal: init_transactions of the next producer fences it
    consumer.close()


def _read_all(bootstrap: str) -> list[bytes]:
    """The sink under read_committed up to its end (the LSO), once every input has been seen."""
    reader = _consumer(bootstrap, "eos-reader", **{"enable.partition.eof": True})
    try:
        reader.assign([TopicPartition(SINK, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while True:
            assert time.monotonic() < deadline, f"read {len(values)} outputs"
            message = reader.poll(0.5)
            if message is None:
                continue
            if message.error() is None:
                values.append(message.value())
            elif message.error().code() == KafkaError._PARTITION_EOF and len(values) >= INPUTS:
                return values
    finally:
        reader.close()


def test_consume_transform_produce_across_a_coordinator_kill_is_exactly_once(tmp_path) -> None:
    with running_cluster(tmp_path, 3, extra={"transaction.state.log.num.partitions": "1",
                                             "offsets.topic.num.partitions": "1"}) as cluster:
        create_topic(cluster, SOURCE, rf=3)
        create_topic(cluster, SINK, rf=3)
        bootstrap = cluster.bootstrap_servers
        feeder = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(INPUTS):
            feeder.produce(SOURCE, b"%03d" % i, partition=0)
        assert feeder.flush(TIMEOUT) == 0

        producer, consumer = _clients(bootstrap)
        done, batch_no, killed, group_killed, restarts = 0, 0, None, None, 0
        deadline = time.monotonic() + 3 * TIMEOUT
        while done < INPUTS:
            assert time.monotonic() < deadline, f"stuck at {done} of {INPUTS} inputs"
            messages = [m for m in consumer.consume(BATCH, 1.0) if m.error() is None]
            if not messages:
                continue
            try:
                producer.begin_transaction()
                for message in messages:
                    producer.produce(SINK, b"out-" + message.value(), partition=0)
                _send_offsets(producer, [TopicPartition(SOURCE, 0, messages[-1].offset() + 1)], consumer)
                assert producer.flush(TIMEOUT) == 0  # the outputs are in the log whatever the outcome
                if batch_no == ABORT_BATCH:
                    batch_no += 1
                    raise KafkaException(KafkaError(KafkaError._STATE, "aborted on purpose"))
                if batch_no == KILL_BATCH and killed is None:
                    killed = partition_info(cluster, "__transaction_state").leader
                    cluster.kill(killed)
                    cluster.start_node(killed)
                if batch_no == GROUP_KILL_BATCH and group_killed is None:
                    cluster.wait_ready(TIMEOUT, nodes=[killed])
                    group_killed = partition_info(cluster, "__consumer_offsets").leader
                    cluster.kill(group_killed)
                    cluster.start_node(group_killed)
                while True:
                    try:
                        producer.commit_transaction(TIMEOUT)
                        break
                    except KafkaException as e:
                        if not e.args[0].retriable():
                            raise
                batch_no += 1
                done = messages[-1].offset() + 1
            except KafkaException:
                # Abortable or fatal: start over from the group's committed offsets.
                _close(producer, consumer)
                producer, consumer = _clients(bootstrap_of(cluster))
                restarts += 1
            except HungClient as hung:
                # As a supervisor restarts a hung process: the successor fences the hung
                # producer (its call may yet return, into a fenced epoch) and aborts its
                # transaction. No call on it again; it is blocked in one.
                warnings.warn(f"{hung}; replaced (confluentinc/librdkafka#5456)", stacklevel=1)
                consumer.close()
                producer, consumer = _clients(bootstrap_of(cluster))
                restarts += 1
        _close(producer, consumer)
        assert None not in (killed, group_killed) and restarts >= 1  # at least the aborted transaction's
        cluster.wait_ready(TIMEOUT, nodes=[killed, group_killed])
        check = _consumer(bootstrap, GROUP)
        try:
            assert check.committed([TopicPartition(SOURCE, 0)], timeout=TIMEOUT)[0].offset == INPUTS
        finally:
            check.close()

        outputs = _read_all(bootstrap)
        assert sorted(outputs) == [b"out-%03d" % i for i in range(INPUTS)]
