"""Every scenario of the differential suite, in the order they run: Kafka's CLI tools
(steps.py), then the client libraries (client_steps.py), then single requests at chosen
versions (wire_steps.py)."""

from tests.differential.client_steps import CLIENTS, KIP848_GROUPS, KIP848_MIGRATION
from tests.differential.steps import (
    BROKER_CONFIGS,
    CLUSTER_BASICS,
    CONFIG_RESOURCES,
    GROUPS,
    MORE_TOPICS,
    OFFSETS,
    OPERATIONS,
    SHARE_DLQ,
    SHARE_GROUPS,
    TOPIC_CONFIGS,
    TOPICS,
)
from tests.differential.wire_steps import WIRE

SCENARIOS = (TOPICS, CLUSTER_BASICS, MORE_TOPICS, TOPIC_CONFIGS, BROKER_CONFIGS, GROUPS, SHARE_GROUPS, SHARE_DLQ, OFFSETS,
             OPERATIONS, CONFIG_RESOURCES, CLIENTS, WIRE, KIP848_GROUPS, KIP848_MIGRATION)
