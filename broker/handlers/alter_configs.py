"""AlterConfigs and IncrementalAlterConfigs: topics, dynamic broker configs, client-metrics
subscriptions (KIP-714), group configs (KIP-848) and, incrementally only, this broker's logger levels.

The controller decides (raft_meta/controller/config_decisions.py) and commits the changes as Config
records in one metadata entry; every broker applies them to its image, and the replica
manager re-reads a changed topic's effective config. `validate_only` runs the same pure
decision on this broker's image and discards it. Errors are per resource, as in Kafka.
Logger levels (type 8) never reach the controller: as Kafka's RuntimeLoggerManager, the
broker named checks every op, then sets or unsets the levels (broker/logger_levels.py), not
persisted.
"""

from __future__ import annotations

import structlog

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.logger_levels import LEVELS, LoggerLevelError, LoggerLevels
from raftka.client.protocol import ErrorCode
from raftka.client.protocol.api_keys import ApiKey
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.config.config_catalogue import group_bounds
from raftka.raft_meta.config.node_config import STATIC_BROKER_KEYS
from raftka.raft_meta.controller.config_decisions import (
    CLIENT_METRICS,
    DELETE,
    OP_NAMES,
    SET,
    AlterResource,
    ConfigOp,
    alter_configs,
)
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.security.acls import AclOperation

log = structlog.get_logger("broker.admin")

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_CLIENT_METRICS = 16
RESOURCE_GROUP = 32
_TYPES = {RESOURCE_TOPIC: "topic", RESOURCE_BROKER: "broker", RESOURCE_CLIENT_METRICS: CLIENT_METRICS,
          RESOURCE_GROUP: "group"}
# Kafka bounds a request by its size only; this bounds the work of one request's decision.
MAX_RESOURCES = 1000
REQUEST_TIMEOUT_MS = 30_000  # the requests carry no timeout; Kafka's request.timeout.ms

AlterConfigsResponse = response_class(ApiKey.ALTER_CONFIGS)
IncrementalAlterConfigsResponse = response_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)


def alter_logger_levels(levels: LoggerLevels, node_id: int, name: str, ops: list[tuple[str, str | None, int]],
                        validate_only: bool) -> tuple[int, str | None]:
    """IncrementalAlterConfigs on a BROKER_LOGGER resource, (logger, level, op) each: every op
    is checked before any is applied (Kafka's RuntimeLoggerManager). (error code, message)."""
    try:
        asked = int(name)
    except ValueError:
        return ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}"
    if asked != node_id:
        return ErrorCode.INVALID_REQUEST, f"Unexpected node id. Expected {node_id}, but received {name}"
    try:
        for logger, level, op in ops:
            if op == SET:
                levels.check_set(logger, level)
            elif op == DELETE:
                levels.check_unset(logger)
            elif op in OP_NAMES:
                return ErrorCode.INVALID_REQUEST, f"{OP_NAMES[op]} operation is not allowed for the BROKER_LOGGER resource"
            else:
                return ErrorCode.INVALID_REQUEST, f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource"
    except LoggerLevelError as exc:
        return exc.code, exc.message
    if not validate_only:
        for logger, level, op in ops:
            if op == SET:
                assert level is not None  # check_set refused a SET without a level
                levels.set_level(logger, level)
                log.info("logger.level.set", logger=logger, level=level)
            else:
                levels.unset(logger)
                log.info("logger.level.unset", logger=logger)
    return 0, None


def _resource(entry, incremental: bool) -> AlterResource | tuple[int, str]:
    kind = _TYPES.get(entry.resource_type)
    if kind is None:
        return ErrorCode.INVALID_REQUEST, (f"resource type {entry.resource_type} cannot be altered here; expected "
                                           f"{RESOURCE_TOPIC} (topic), {RESOURCE_BROKER} (broker) or "
                                           f"{RESOURCE_CLIENT_METRICS} (client metrics) or {RESOURCE_GROUP} (group)")
    ops = tuple(ConfigOp(c.name, c.value, c.config_operation if incremental else SET) for c in entry.configs)
    return AlterResource(kind, entry.resource_name, ops, incremental)


async def _alter(ctx, request, incremental: bool, conn=None) -> list[dict]:
    answers: dict[int, tuple[int, str | None]] = {}
    asked: list[tuple[int, AlterResource]] = []
    for position, entry in enumerate(request.resources):
        if position >= MAX_RESOURCES:
            answers[position] = (ErrorCode.POLICY_VIOLATION, f"more than {MAX_RESOURCES} resources in one request")
            continue
        refusal = acl_checks.config_resource_error(ctx, conn, AclOperation.ALTER_CONFIGS, entry.resource_type,
                                                   entry.resource_name)
        if refusal is None and entry.resource_type == RESOURCE_BROKER_LOGGER:
            if not incremental:  # Kafka: the legacy AlterConfigs does not know loggers
                answers[position] = (ErrorCode.INVALID_REQUEST, "Unknown resource type BROKER_LOGGER")
            else:
                answers[position] = alter_logger_levels(
                    LEVELS, ctx.config.node_id, entry.resource_name,
                    [(c.name, c.value, c.config_operation) for c in entry.configs], request.validate_only)
            continue
        resource = refusal if refusal is not None else _resource(entry, incremental)
        if isinstance(resource, tuple):
            answers[position] = resource
        else:
            asked.append((position, resource))
    if asked:
        resources = [r for _, r in asked]
        try:
            if request.validate_only:
                _, refused = alter_configs(ctx.image, resources, frozenset(ctx.config.raw) | STATIC_BROKER_KEYS,
                                            group_bounds(ctx.config.raw))
                errors = [refused.get(i) for i in range(len(resources))]
            else:
                errors = await ctx.controller.alter_configs(resources, REQUEST_TIMEOUT_MS)
        except ControllerError as exc:  # the whole request: POLICY_VIOLATION, REQUEST_TIMED_OUT, NOT_CONTROLLER
            errors = [exc] * len(resources)
        for (position, resource), error in zip(asked, errors, strict=True):
            if error is None:
                answers[position] = (0, None)
                if not request.validate_only:
                    log.info("configs.altered", resource_type=resource.resource_type,
                             resource_name=resource.resource_name, incremental=incremental,
                             keys=[op.name for op in resource.ops])
            else:
                answers[position] = (error.code, error.message)
    return [{"error_code": answers[i][0], "error_message": answers[i][1], "resource_type": entry.resource_type,
             "resource_name": entry.resource_name} for i, entry in enumerate(request.resources)]


async def handle_alter_configs(ctx: BrokerContext, header, request, conn=None):
    return AlterConfigsResponse(throttle_time_ms=0, responses=await _alter(ctx, request, incremental=False,
                                                                                   conn=conn))


async def handle_incremental_alter_configs(ctx: BrokerContext, header, request, conn=None):
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=await _alter(ctx, request,
                                                                                              incremental=True,
                                                                                              conn=conn))
