"""raftka's Python SDK (docs/architecture.md, "Layers"): trio-native clients plus blocking facades.

    from raftka.client import AsyncProducer, AsyncConsumer, AsyncAdmin, TopicPartition   # trio
    from raftka.client import Producer, Consumer, Admin                                  # blocking

The same names are importable from `raftka` itself. They are resolved on first
use, so importing a sub-package (`raftka.client.protocol`) pulls in no trio,
threads or facades.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "Admin",
    "AsyncAdmin",
    "AsyncConsumer",
    "AsyncProducer",
    "BrokerInfo",
    "ClusterDescription",
    "ConfigEntry",
    "Consumer",
    "ConsumerRecord",
    "DeliveryFuture",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NewTopic",
    "NoOffsetForPartitionError",
    "NotLeaderOrFollowerError",
    "OffsetOutOfRangeError",
    "PartitionInfo",
    "Producer",
    "RecordMetadata",
    "RequestTimedOutError",
    "TopicAlreadyExistsError",
    "TopicDescription",
    "TopicPartition",
    "UnknownTopicOrPartitionError",
    "error_for_code",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'raftka.client' has no attribute {name!r}")
    import raftka

    return getattr(raftka, name)
