"""raftka's Python SDK (docs/architecture.md, "Layers"): trio-native clients plus blocking facades.

    from raftka.client import AsyncProducer, AsyncConsumer, AsyncAdmin, TopicPartition   # trio
    from raftka.client import Producer, Consumer, Admin                                  # blocking
    from raftka.client import AsyncShareConsumer, ShareConsumer, AcknowledgeType         # share groups

The same names are importable from `raftka` itself. They are resolved on first
use, so importing a sub-package (`raftka.client.protocol`) pulls in no trio,
threads or facades.
"""

from __future__ import annotations

import importlib
from typing import Any

# The SDK's public names (also importable from `raftka`) -> the module that defines each.
PUBLIC: dict[str, str] = {
    **dict.fromkeys(("Producer", "Consumer", "Admin", "ShareConsumer"), "raftka.client.blocking"),
    "AsyncProducer": "raftka.client.producer",
    # Share groups (KIP-932): a work queue's consumers
    "AsyncShareConsumer": "raftka.client.share_consumer",
    "AcknowledgeType": "raftka.client.share_records",
    "ShareConsumerRecord": "raftka.client.records",
    "DeliveryFuture": "raftka.client.producer",
    "AsyncConsumer": "raftka.client.consumer",
    "NoOffsetForPartitionError": "raftka.client.consumer",
    **dict.fromkeys(("AsyncAdmin", "NewTopic", "TopicDescription", "ClusterDescription", "ConfigEntry",
                     "QuotaFilter"),
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
    # Transactions (KIP-98)
    **dict.fromkeys((
        "TransactionError", "AbortableTransactionError", "FatalTransactionError",
        "ProducerFencedError", "TransactionalIdAuthorizationFailedError",
        "ConcurrentTransactionsError",
    ), "raftka.client.errors"),
    "ConsumerGroupMetadata": "raftka.client.records",
    # Security (what `raftka cluster up --secure` prints for the SDK)
    **dict.fromkeys(("ClientSecurity", "read_properties_file"), "raftka.client.security"),
}


__all__ = sorted(PUBLIC)


def __getattr__(name: str) -> Any:
    module = PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'raftka.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this hook
    return value
