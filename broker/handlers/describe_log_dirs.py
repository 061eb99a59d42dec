"""DescribeLogDirs: this broker's log dirs, the partitions in each (size, lag behind the high
watermark) and, v4+, each dir's total and usable bytes. `topics` null: every partition."""

from __future__ import annotations

import shutil

import trio

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.client.protocol import ErrorCode
from raftka.client.protocol.api_keys import ApiKey
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.security.acls import AclOperation

DescribeLogDirsResponse = response_class(ApiKey.DESCRIBE_LOG_DIRS)


def _usage(path) -> tuple[int, int] | None:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    return usage.total, usage.free


async def handle(ctx: BrokerContext, header, request, conn=None):
    denied = acl_checks.cluster_error(ctx, conn, AclOperation.DESCRIBE)
    if denied:  # Kafka: DESCRIBE on the cluster, else no log dirs
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=denied, results=[])
    wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
    replicas = ctx.replicas
    dirs = {str(d): {} for d in replicas.log_dirs}  # dir -> topic -> partition entries
    for (topic, index), partition in sorted(replicas.partitions.items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        plog = partition.log
        entry = {"partition_index": index, "partition_size": plog.size,
                 "offset_lag": max(0, partition.high_watermark - plog.log_end_offset), "is_future_key": False}
        dirs.setdefault(str(plog.dir.parent), {}).setdefault(topic, []).append(entry)
    results = []
    for path, topics in dirs.items():
        usage = await trio.to_thread.run_sync(_usage, path)  # statvfs: off the event loop
        results.append({
            "error_code": 0 if usage is not None else ErrorCode.KAFKA_STORAGE_ERROR, "log_dir": path,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
            "total_bytes": usage[0] if usage else -1, "usable_bytes": usage[1] if usage else -1})
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)
