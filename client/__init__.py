"""raftka's Python SDK (see DESIGN.md): trio-native clients plus blocking facades.

    from client import AsyncProducer, AsyncConsumer, AsyncAdmin, TopicPartition   # trio
    from client import Producer, Consumer, Admin                                  # blocking
"""

from client.admin import AsyncAdmin, ClusterDescription, ConfigEntry, NewTopic, TopicDescription
from client.blocking import Admin, Consumer, Producer
from client.consumer import AsyncConsumer, NoOffsetForPartitionError
from client.errors import (
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
from client.metadata import BrokerInfo, PartitionInfo
from client.producer import AsyncProducer, DeliveryFuture
from client.records import ConsumerRecord, RecordMetadata, TopicPartition

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
