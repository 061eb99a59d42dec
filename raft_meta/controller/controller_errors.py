"""Errors a controller decision returns to the requester, with Kafka's error codes."""

from __future__ import annotations

# Kafka error name -> code (org.apache.kafka.common.protocol.Errors).
KAFKA_ERROR_CODES = {
    "UNKNOWN_SERVER_ERROR": -1,
    "UNKNOWN_TOPIC_OR_PARTITION": 3,
    "NOT_LEADER_OR_FOLLOWER": 6,
    "REQUEST_TIMED_OUT": 7,
    "INVALID_TOPIC_EXCEPTION": 17,
    "TOPIC_ALREADY_EXISTS": 36,
    "INVALID_PARTITIONS": 37,
    "INVALID_REPLICATION_FACTOR": 38,
    "INVALID_CONFIG": 40,
    "NOT_CONTROLLER": 41,
    "INVALID_REQUEST": 42,
    "POLICY_VIOLATION": 44,
    "FENCED_LEADER_EPOCH": 74,
    "STALE_BROKER_EPOCH": 77,
    "INVALID_UPDATE_VERSION": 95,
    "DUPLICATE_BROKER_REGISTRATION": 101,
    "BROKER_ID_NOT_REGISTERED": 102,
    "INELIGIBLE_REPLICA": 107,
    "INVALID_REPLICA_ASSIGNMENT": 39,
    "PREFERRED_LEADER_NOT_AVAILABLE": 80,
    "ELIGIBLE_LEADERS_NOT_AVAILABLE": 83,
    "ELECTION_NOT_NEEDED": 84,
    "NO_REASSIGNMENT_IN_PROGRESS": 85,
}


class ControllerError(Exception):
    """A request the controller refuses. `name` is Kafka's error name, `code` its number."""

    def __init__(self, name: str, message: str) -> None:
        if name not in KAFKA_ERROR_CODES:
            raise ValueError(f"unknown Kafka error name {name!r}; expected one of {sorted(KAFKA_ERROR_CODES)}")
        super().__init__(f"{name}: {message}")
        self.name = name
        self.code = KAFKA_ERROR_CODES[name]
        self.message = message
