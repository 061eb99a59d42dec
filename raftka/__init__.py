"""raftka: a Kafka-compatible streaming log with a built-in Raft metadata quorum.

The public SDK, importable from here::

    from raftka import Producer, Consumer, Admin, NewTopic, TopicPartition   # blocking
    from raftka import AsyncProducer, AsyncConsumer, AsyncAdmin              # trio
    from raftka import ShareConsumer, AsyncShareConsumer, AcknowledgeType    # share groups (queues)

Every other layer lives under this one namespace (`raftka.log`, `raftka.client`,
`raftka.broker`, `raftka.raft_meta`, `raftka.spark_source`, `raftka.chaos`; see
docs/architecture.md). This package's own subpackages (`raftka.cli`, `raftka.testing`) sit
above every layer and no layer imports them.

The names below are resolved on first use (PEP 562), so `import raftka` costs
no trio, no threads and no facades until a client class is touched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raftka import client as _client
from raftka.client import PUBLIC as _PUBLIC  # the SDK's public names -> defining modules

__version__ = "0.1.0"

__all__ = ["__version__", *sorted(_PUBLIC)]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'raftka' has no attribute {name!r}")
    value = globals()[name] = getattr(_client, name)  # resolved there; later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})


if TYPE_CHECKING:  # for type checkers and IDEs; never executed
    from raftka.client.admin import (
        AsyncAdmin,
        ClusterDescription,
        ConfigEntry,
        NewTopic,
        TopicDescription,
    )
    from raftka.client.blocking import Admin, Consumer, Producer, ShareConsumer
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
    from raftka.client.records import (
        ConsumerRecord,
        RecordMetadata,
        ShareConsumerRecord,
        TopicPartition,
    )
    from raftka.client.security import ClientSecurity, read_properties_file
    from raftka.client.share_consumer import AsyncShareConsumer
    from raftka.client.share_records import AcknowledgeType
