"""The transactional producer's requests to the coordinators (the trio shell).

`TxnCoordinatorClient` finds the transaction coordinator (FindCoordinator
key_type 1), sends InitProducerId / AddPartitionsToTxn / AddOffsetsToTxn /
EndTxn to it, and TxnOffsetCommit to the group's coordinator, as librdkafka
does. Each answer goes through `transactions.classify`: retriable errors are
retried after `retry_backoff_ms` (NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE
after finding the coordinator again) until `max_block_ms` has passed, then
KafkaTimeoutError (the state is unchanged: the call may be repeated); an
abortable or fatal error moves the TransactionManager and is raised.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import trio

from raftka.client.cluster import Cluster
from raftka.client.errors import KafkaConnectionError, KafkaTimeoutError, error_for_code
from raftka.client.protocol import ApiKey
from raftka.client.records import ConsumerGroupMetadata, TopicPartition
from raftka.client.transactions import Kind, TransactionManager, TxnApi, worst_error

# KIP-360: InitProducerId v3 carries the current (pid, epoch), so an abort can bump the epoch.
INIT_PRODUCER_ID_BUMP_VERSION = 3
COORDINATOR_TRANSACTION = 1
COORDINATOR_GROUP = 0


class TxnCoordinatorClient:
    def __init__(self, cluster: Cluster, tm: TransactionManager, *, retry_backoff_ms: int,
                 max_block_ms: int) -> None:
        self.cluster = cluster
        self.tm = tm
        self.retry_backoff = retry_backoff_ms / 1000
        self.max_block = max_block_ms / 1000
        self.coordinator_id: int | None = None
        self._group_coordinators: dict[str, int] = {}

    # --- coordinators ----------------------------------------------------------------
    async def _find(self, key: str, key_type: int, deadline: float) -> int:
        while True:
            try:
                response = await self.cluster.send_any(
                    ApiKey.FIND_COORDINATOR, {"key": key, "key_type": key_type})
                if response.error_code == 0:
                    if self.cluster.metadata.broker(response.node_id) is None:
                        await self.cluster.refresh_metadata()
                    return response.node_id
                error = error_for_code(response.error_code,
                                       f"FindCoordinator for {key!r} (key_type {key_type})")
                if self.tm.on_error(TxnApi.FIND_COORDINATOR, error) is Kind.FATAL:
                    raise self.tm.error or error
            except KafkaConnectionError:
                pass
            self._check(deadline, f"FindCoordinator for {key!r}")
            await trio.sleep(self.retry_backoff)

    def _check(self, deadline: float, what: str) -> None:
        if trio.current_time() > deadline:
            raise KafkaTimeoutError(f"transactional id {self.tm.transactional_id!r}: {what} did "
                                    f"not succeed within max_block_ms ({self.max_block:.0f} s)")

    async def _call(self, api: TxnApi, api_key: ApiKey, build: Callable[[int], dict[str, Any]],
                    error_of: Callable[[Any], int], *, group: str | None = None) -> Any:
        """Send to the coordinator (the group's with `group`) until an answer that is not
        retriable; return it when its error is 0, raise the TransactionManager's error else."""
        deadline = trio.current_time() + self.max_block
        while True:
            node = await self._coordinator(group, deadline)
            try:
                conn = await self.cluster.connection(node)
                version = conn.version(api_key)
                response = await conn.request(api_key, build(version), version=version)
            except KafkaConnectionError:
                self._forget(group)
                self._check(deadline, api.value)
                await trio.sleep(self.retry_backoff)
                continue
            code = error_of(response)
            if code == 0:
                return response
            error = error_for_code(code, f"{api.value} for transactional id "
                                         f"{self.tm.transactional_id!r}")
            kind = self.tm.on_error(api, error)
            if kind is Kind.REFIND:
                self._forget(group)
            elif kind is not Kind.RETRY:
                assert self.tm.error is not None
                raise self.tm.error
            self._check(deadline, f"{api.value} ({error.name})")
            await trio.sleep(self.retry_backoff)

    async def _coordinator(self, group: str | None, deadline: float) -> int:
        if group is not None:
            node = self._group_coordinators.get(group)
            if node is None:
                node = self._group_coordinators[group] = await self._find(
                    group, COORDINATOR_GROUP, deadline)
            return node
        if self.coordinator_id is None:
            self.coordinator_id = await self._find(self.tm.transactional_id,
                                                   COORDINATOR_TRANSACTION, deadline)
        return self.coordinator_id

    def _forget(self, group: str | None) -> None:
        if group is None:
            self.coordinator_id = None
        else:
            self._group_coordinators.pop(group, None)

    # --- the APIs --------------------------------------------------------------------
    async def init_producer_id(self) -> tuple[int, int]:
        """InitProducerId with the transactional id: (producer_id, epoch). Bumps the
        current epoch (KIP-360) when the TransactionManager says so."""
        tm = self.tm
        pid, epoch = tm.init_request_ids()

        def build(version: int) -> dict[str, Any]:
            tm.can_bump = version >= INIT_PRODUCER_ID_BUMP_VERSION
            return {"transactional_id": tm.transactional_id,
                    "transaction_timeout_ms": tm.transaction_timeout_ms,
                    "producer_id": pid, "producer_epoch": epoch}

        response = await self._call(TxnApi.INIT_PRODUCER_ID, ApiKey.INIT_PRODUCER_ID, build,
                                    lambda r: r.error_code)
        return response.producer_id, response.producer_epoch

    async def add_partitions(self, tps: set[TopicPartition]) -> None:
        tm = self.tm
        topics: dict[str, list[int]] = {}
        for tp in sorted(tps):
            topics.setdefault(tp.topic, []).append(tp.partition)

        def build(version: int) -> dict[str, Any]:
            return {"v3_and_below_transactional_id": tm.transactional_id,
                    "v3_and_below_producer_id": tm.producer_id,
                    "v3_and_below_producer_epoch": tm.producer_epoch,
                    "v3_and_below_topics": [{"name": t, "partitions": p}
                                            for t, p in topics.items()]}

        def error_of(response: Any) -> int:
            return worst_error(TxnApi.ADD_PARTITIONS, [
                p.partition_error_code for t in response.results_by_topic_v3_and_below
                for p in t.results_by_partition])

        await self._call(TxnApi.ADD_PARTITIONS, ApiKey.ADD_PARTITIONS_TO_TXN, build, error_of)
        tm.on_partitions_added(set(tps))

    async def add_offsets(self, group_id: str) -> None:
        tm = self.tm
        await self._call(TxnApi.ADD_OFFSETS, ApiKey.ADD_OFFSETS_TO_TXN, lambda v: {
            "transactional_id": tm.transactional_id, "producer_id": tm.producer_id,
            "producer_epoch": tm.producer_epoch, "group_id": group_id}, lambda r: r.error_code)
        tm.on_offsets_added()

    async def txn_offset_commit(self, offsets: Mapping[TopicPartition, tuple[int, str, int]],
                                group: ConsumerGroupMetadata) -> None:
        """TxnOffsetCommit to the group's coordinator; v3+ carries the member's generation
        and id so a zombie member is fenced (KIP-447). offsets: tp -> (offset, metadata,
        leader epoch)."""
        tm = self.tm
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, (offset, metadata, leader_epoch) in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": offset,
                "committed_leader_epoch": leader_epoch, "committed_metadata": metadata})

        def build(version: int) -> dict[str, Any]:
            return {"transactional_id": tm.transactional_id, "group_id": group.group_id,
                    "producer_id": tm.producer_id, "producer_epoch": tm.producer_epoch,
                    "generation_id": group.generation_id, "member_id": group.member_id,
                    "group_instance_id": group.group_instance_id,
                    "topics": [{"name": t, "partitions": p} for t, p in topics.items()]}

        def error_of(response: Any) -> int:
            return worst_error(TxnApi.TXN_OFFSET_COMMIT, [
                p.error_code for t in response.topics for p in t.partitions])

        await self._call(TxnApi.TXN_OFFSET_COMMIT, ApiKey.TXN_OFFSET_COMMIT, build, error_of,
                         group=group.group_id)

    async def end_txn(self, commit: bool) -> None:
        tm = self.tm
        await self._call(TxnApi.END_TXN, ApiKey.END_TXN, lambda v: {
            "transactional_id": tm.transactional_id, "producer_id": tm.producer_id,
            "producer_epoch": tm.producer_epoch, "committed": commit}, lambda r: r.error_code)
