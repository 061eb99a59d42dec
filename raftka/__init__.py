"""raftka: a Kafka-compatible streaming log with a built-in Raft metadata quorum.

The public SDK, importable from here::

    from raftka import Producer, Consumer, Admin, NewTopic, TopicPartition   # blocking
    from raftka import AsyncProducer, AsyncConsumer, AsyncAdmin              # trio

Every other layer lives under this one namespace (`raftka.log`, `raftka.client`,
`raftka.broker`, `raftka.raft_meta`, `raftka.spark_source`, `raftka.chaos`; see
docs/architecture.md). This module's own files (`cli`, `cmd_*`, `pytest_plugin`) sit above
every layer and no layer imports them.

The names below are resolved on first use (PEP 562), so `import raftka` costs
no trio, no threads and no facades until a client class is touched.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
_LAZY: dict[str, str] = {
    **dict.fromkeys(("Producer", "Consumer", "Admin"), "raftka.client.blocking"),
    "AsyncProducer": "raftka.client.producer",
    "DeliveryFuture": "raftka.client.producer",
    "AsyncConsumer": "raftka.client.consumer",
    "NoOffsetForPartitionError": "raftka.client.consumer",
    **dict.fromkeys(("AsyncAdmin", "NewTopic", "TopicDescription", "ClusterDescription", "ConfigEntry"),
                    "raftka.client.admin"),
    **dict.fromkeys(("TopicPartition", "ConsumerRecord", "RecordMetadata"), "raftka.client.records"),
    **dict.fromkeys(("BrokerInfo", "PartitionInfo"), "raftka.client.metadata"),
    **dict.fromkeys((
        "KafkaError", "KafkaConnectionError", "KafkaTimeoutError", "IllegalStateError",
        "UnsupportedVersionError", "UnknownServerError", "OffsetOutOfRangeError", "CorruptMessageError",
        "UnknownTopicOrPartitionError", "LeaderNotAvailableError", "NotLeaderOrFollowerError",
        "RequestTimedOutError", "MessageTooLargeError", "NotEnoughReplicasError",
        "NotEnoughReplicasAfterAppendError", "TopicAlreadyExistsError", "InvalidPartitionsError",
        "InvalidReplicationFactorError", "InvalidConfigError", "NotControllerError", "InvalidRequestError",
        "OutOfOrderSequenceNumberError", "DuplicateSequenceNumberError", "InvalidProducerEpochError",
        "UnknownProducerIdError", "FencedLeaderEpochError", "UnknownLeaderEpochError",
        "UnsupportedCompressionTypeError", "error_for_code", "error_class",
    ), "raftka.client.errors"),
}

__all__ = ["__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'raftka' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


if TYPE_CHECKING:  # for type checkers and IDEs; never executed
    from raftka.client.admin import (
        AsyncAdmin,
        ClusterDescription,
        ConfigEntry,
        NewTopic,
        TopicDescription,
    )
    from raftka.client.blocking import Admin, Consumer, Producer
    from raftka.client.consumer import AsyncConsumer, NoOffsetForPartitionError
    from raftka.client.errors import (
        CorruptMessageError,
        IllegalStateError,
        KafkaConnectionError,
        KafkaError,
        KafkaTimeoutError,
        NotLeaderOrFollowerError,
        OffsetOutOfRangeError,
        RequestTimedOutError,
        TopicAlreadyExistsError,
        UnknownTopicOrPartitionError,
        error_for_code,
    )
    from raftka.client.metadata import BrokerInfo, PartitionInfo
    from raftka.client.producer import AsyncProducer, DeliveryFuture
    from raftka.client.records import ConsumerRecord, RecordMetadata, TopicPartition
