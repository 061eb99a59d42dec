"""CreateTopics, DeleteTopics, CreatePartitions — decided and committed by the controller.

`validate_only` runs the controller's pure decision on the current image and
discards it, so it reports exactly the errors a real request would get.
"""

from __future__ import annotations

import structlog

from raftka.broker.errors import error_code_for
from raftka.broker.topic_config import validate_topic_configs
from raftka.broker.topic_names import topic_name_error
from raftka.client.protocol import (
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    ErrorCode,
)
from raftka.raft_meta import controller_decisions as decide
from raftka.raft_meta.controller_errors import ControllerError

log = structlog.get_logger("broker.admin")

DEFAULT = -1


async def _create_one(ctx, topic, validate_only: bool) -> dict:
    result = {"name": topic.name, "error_code": 0, "error_message": None}
    problem = topic_name_error(topic.name)
    if problem is not None:
        result.update(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, error_message=problem)
        return result
    if topic.assignments:
        result.update(error_code=ErrorCode.INVALID_REQUEST,
                      error_message="manual replica assignments are not supported; use "
                                    "num_partitions and replication_factor")
        return result
    configs = {c.name: c.value for c in topic.configs}
    try:
        validate_topic_configs(configs)
    except ValueError as exc:
        result.update(error_code=ErrorCode.INVALID_CONFIG, error_message=str(exc))
        return result
    partitions = ctx.config.num_partitions if topic.num_partitions == DEFAULT else topic.num_partitions
    rf = ctx.config.default_replication_factor if topic.replication_factor == DEFAULT else topic.replication_factor
    if rf < 1:
        result.update(error_code=ErrorCode.INVALID_REPLICATION_FACTOR,
                      error_message=f"replication factor {rf}; expected >= 1")
        return result
    try:
        if validate_only:
            decide.create_topic(ctx.image, topic.name, partitions, rf, "validate-only", configs)
        else:
            await ctx.controller.create_topic(topic.name, partitions, rf, configs)
            log.info("topic.created", topic=topic.name, partitions=partitions, replication_factor=rf)
    except Exception as exc:
        result.update(error_code=error_code_for(exc), error_message=_message(exc))
    return result


def _message(exc: Exception) -> str:
    return exc.message if isinstance(exc, ControllerError) else str(exc)


async def handle_create_topics(ctx, header, request, conn=None) -> CreateTopicsResponse:
    results = [await _create_one(ctx, t, request.validate_only) for t in request.topics]
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


async def handle_delete_topics(ctx, header, request, conn=None) -> DeleteTopicsResponse:
    responses = []
    for name in request.topic_names:
        code = 0
        try:
            await ctx.controller.delete_topic(name)
            log.info("topic.deleted", topic=name)
        except Exception as exc:
            code = error_code_for(exc)
        responses.append({"name": name, "error_code": code})
    return DeleteTopicsResponse(throttle_time_ms=0, responses=responses)


async def handle_create_partitions(ctx, header, request, conn=None) -> CreatePartitionsResponse:
    results = []
    for topic in request.topics:
        result = {"name": topic.name, "error_code": 0, "error_message": None}
        try:
            if topic.assignments:
                raise ControllerError("INVALID_REQUEST", "manual replica assignments are not supported")
            if request.validate_only:
                decide.create_partitions(ctx.image, topic.name, topic.count)
            else:
                await ctx.controller.create_partitions(topic.name, topic.count)
        except Exception as exc:
            result.update(error_code=error_code_for(exc), error_message=_message(exc))
        results.append(result)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
