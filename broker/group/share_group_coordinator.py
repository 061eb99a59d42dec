"""Share groups (KIP-932) in the group coordinator: the trio shell around
broker/group/share_group_state.py, `__consumer_offsets` and the share-state `Persister`.

A share group lives on the `__consumer_offsets` partition its id hashes to, as every
group does (`GroupCoordinator` owns leadership, loads, timers and the append path; this
class keeps the share groups of the partitions it leads). A ShareGroupHeartbeat:

1. is refused when the id belongs to a classic or consumer group (GROUP_ID_NOT_FOUND,
   "Group <id> is not a share group.", as Kafka 4.4), or is unknown with an epoch other
   than 0 ("Share group <id> not found.");
2. initializes, through `Persister.initialize`, the share state of every subscribed
   partition not yet initialized (the ShareGroupStatePartitionMetadata record names them
   initializing first, initialized once the persister answered): only initialized
   partitions are assignable. A failure leaves the partition initializing; the next
   heartbeat retries it. Kafka does this after answering and bumps the group epoch when
   it completes; raftka does it before, so a joining member gets its partitions at once;
3. runs the core and writes the records it changed with acks=all before answering. The
   core takes the metadata image's topics (`GroupCoordinator.topic_metas`, whose metadata
   hashes are computed off the event loop) for the subscribed topics' metadata hash it keeps
   in the ShareGroupMetadata record (KIP-1101).

Heartbeats of one group run one at a time (a lock per group): the persister calls await.
Sessions expire on the coordinator's group timer (`group.share.session.timeout.ms`, or
the group's `share.session.timeout.ms`); expired members' records are written then.
DeleteGroups of an empty share group deletes the share state of its partitions
(`Persister.delete`) before its tombstones.

A `ShareGroupListener` (the broker's SharePartitionManager) hears of members that left
or expired, whose acquired records it releases, and of groups whose share state was
deleted or rewritten (DeleteGroups, Alter/DeleteShareGroupOffsets), whose cached share
partitions it forgets (the next use reads the new state).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import structlog
import trio

from raftka.broker.group.group_metadata_manager import append_and_wait
from raftka.broker.group.group_records import ShareGroupKey
from raftka.broker.group.share_assignor import TopicPartition
from raftka.broker.group.share_group_records import decode_record, encode_record
from raftka.broker.group.share_group_state import (
    HEARTBEAT_INTERVAL_MS_DEFAULT,
    MAX_SIZE_DEFAULT,
    SESSION_TIMEOUT_MS_DEFAULT,
    Heartbeat,
    HeartbeatResponse,
    ShareGroupConfig,
    ShareGroupRecord,
    ShareGroupState,
    changes,
)
from raftka.broker.group.share_persister import Persister, PersisterError, ShareStateKey
from raftka.client.protocol import ErrorCode

if TYPE_CHECKING:
    from raftka.broker.group.group_coordinator import GroupCoordinator

log = structlog.get_logger("broker.share_groups")

GROUP_ID_NOT_FOUND = int(ErrorCode.GROUP_ID_NOT_FOUND)
INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
NON_EMPTY_GROUP = int(ErrorCode.NON_EMPTY_GROUP)
COMMIT_TIMEOUT_S = 5.0


class ShareGroupListener(Protocol):
    """Told when a share member is gone (left or expired) and when a share group's state was
    deleted or rewritten (Kafka's ShareGroupListener, implemented by the SharePartitionManager)."""

    def member_left(self, group_id: str, member_id: str) -> None: ...

    def forget_group(self, group_id: str) -> None: ...


class ShareGroupCoordinator:
    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self.groups: dict[str, ShareGroupState] = {}
        self._locks: dict[str, trio.Lock] = {}
        self.listeners: list[ShareGroupListener] = []

    def _member_left(self, group_id: str, member_id: str) -> None:
        for listener in self.listeners:
            listener.member_left(group_id, member_id)

    def _forget(self, group_id: str) -> None:
        for listener in self.listeners:
            listener.forget_group(group_id)

    # --- the metadata image -----------------------------------------------------------
    def _topics(self) -> dict[str, tuple[str, int]]:
        """name -> (topic id, partition count) of the topics that exist."""
        return {t.name: (str(t.topic_id), len(t.partitions))
                for t in self.coordinator.replicas.image.topics.values()}

    def _config(self, group_id: str) -> ShareGroupConfig:
        """The group's `share.*` configs (IncrementalAlterConfigs on the group), else the
        broker's `group.share.*`, read at every heartbeat as Kafka's coordinator does."""
        own = self.coordinator.replicas.image.configs.get(("group", group_id), {})
        config = self.coordinator.config
        session = own.get("share.session.timeout.ms")
        interval = own.get("share.heartbeat.interval.ms")
        return ShareGroupConfig(
            int(session) if session is not None else
            getattr(config, "group_share_session_timeout_ms", SESSION_TIMEOUT_MS_DEFAULT),
            int(interval) if interval is not None else
            getattr(config, "group_share_heartbeat_interval_ms", HEARTBEAT_INTERVAL_MS_DEFAULT),
            getattr(config, "group_share_max_size", MAX_SIZE_DEFAULT))

    # --- loads -------------------------------------------------------------------------
    def install(self, records: list[tuple[ShareGroupKey, bytes | None]], now_ms: float) -> int:
        """The share groups a partition load read back (records in log order); how many."""
        topics = self._topics()
        names = {tid: name for name, (tid, _) in topics.items()}
        loaded: dict[str, ShareGroupState] = {}
        for key, value in records:
            try:
                record = decode_record(key.kind, key.member_id, value, names)
            except ValueError as exc:
                log.warning("share_group.bad_record", group=key.group_id, kind=key.kind, error=str(exc))
                continue
            group = loaded.get(key.group_id) or loaded.setdefault(key.group_id, ShareGroupState(key.group_id))
            group.replay(record)
        counts = {name: count for name, (_, count) in topics.items()}
        for gid, group in loaded.items():
            if group.deleted:
                continue
            group.config = self._config(gid)
            group.restart_sessions(group.assignable(counts), int(now_ms))
            self.groups[gid] = group
            self.coordinator.timers.set(gid, group.next_session_deadline())
        return sum(1 for g in loaded.values() if not g.deleted)

    def drop(self, group_ids: list[str]) -> None:
        for gid in group_ids:
            self.groups.pop(gid, None)
            self.coordinator.timers.set(gid, None)

    # --- ShareGroupHeartbeat -------------------------------------------------------------
    async def heartbeat(self, group_id: str, hb: Heartbeat, persister: Persister, now_ms: float) -> HeartbeatResponse:
        from raftka.broker.group.group_coordinator import CoordinatorError

        def error(code: int, message: str) -> HeartbeatResponse:
            return HeartbeatResponse(code, message, hb.member_id, hb.member_epoch)

        if not group_id.strip():
            return error(INVALID_REQUEST, "GroupId can't be empty.")
        try:
            partition = self.coordinator._partition(group_id)
        except CoordinatorError as exc:
            return error(exc.code, str(exc))
        if self.coordinator.other_group_type(group_id, "share"):
            return error(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        lock = self._locks.setdefault(group_id, trio.Lock())
        async with lock:
            group = self.groups.get(group_id)
            new = group is None
            if group is None:
                if hb.member_epoch != 0 and not ShareGroupState(group_id).request_error(hb):
                    return error(GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
                group = ShareGroupState(group_id)
            group.config = self._config(group_id)
            topics = self._topics()
            counts = {name: count for name, (_, count) in topics.items()}
            before = group.records()
            group.forget_topics(counts)  # a deleted topic is initialized again if it comes back
            await self._append(partition, group_id, changes(before, group.records()))
            if not group.request_error(hb) and hb.member_epoch >= 0:
                await self._initialize(group, hb, topics, persister, partition)
            before_hb = group.records()
            response = group.heartbeat(hb, group.assignable(counts), int(now_ms), self.coordinator.topic_metas())
            if response.error and new:
                return response  # a refused join does not create the group
            self.groups[group_id] = group
            self.coordinator.timers.set(group_id, group.next_session_deadline())
            records = changes(before_hb, group.records())
            if records:
                code = await self._append(partition, group_id, records)
                if code:
                    return error(code, "the group's records could not be written")
        if not response.error and hb.member_epoch == 0:
            log.info("group.member_joined", group=group_id, member=response.member_id, protocol="share",
                     epoch=response.member_epoch, client_id=hb.client_id)
        elif not response.error and hb.member_epoch < 0:
            log.info("group.member_left", group=group_id, member=hb.member_id, protocol="share")
            self._member_left(group_id, hb.member_id)
        return response

    async def _initialize(self, group: ShareGroupState, hb: Heartbeat, topics: Mapping[str, tuple[str, int]],
                          persister: Persister, partition) -> None:
        """Initialize the share state of the subscribed partitions that are not yet (step 2)."""
        # What the group subscribes to once this heartbeat is applied.
        member = group.members.get(hb.member_id)
        own = (hb.subscribed_topic_names if hb.subscribed_topic_names is not None
               else member.subscribed_topic_names if member is not None else ())
        subscribed = set(own) | {t for m in group.members.values() if m is not member
                                 for t in m.subscribed_topic_names}
        counts = {name: count for name, (_, count) in topics.items()}
        wanted = group.to_initialize(subscribed, counts)
        if not wanted:
            return
        before = group.records()
        group.mark_initializing(wanted)
        code = await self._append(partition, group.group_id, changes(before, group.records()))
        if code:
            return
        state_epoch = group.group_epoch + 1  # the epoch this heartbeat moves the group to
        done: list[TopicPartition] = []
        for (topic, index), start_offset in sorted(wanted.items()):
            key = ShareStateKey(group.group_id, uuid.UUID(topics[topic][0]), index)
            try:
                await persister.initialize(key, state_epoch, start_offset)
            except (PersisterError, Exception) as exc:  # retried at the next heartbeat
                log.warning("share_group.initialize_failed", group=group.group_id, topic=topic, partition=index,
                            error=str(exc))
                continue
            done.append((topic, index))
        before = group.records()
        group.mark_initialized(done)
        await self._append(partition, group.group_id, changes(before, group.records()))

    async def _append(self, partition, group_id: str, records: list[ShareGroupRecord]) -> int:
        from raftka.broker.group.group_coordinator import append_error_code

        if not records:
            return 0
        ids = {name: tid for name, (tid, _) in self._topics().items()}
        try:
            await append_and_wait(partition, [encode_record(group_id, r, ids) for r in records], COMMIT_TIMEOUT_S)
            return 0
        except Exception as exc:
            log.warning("group.persist_failed", group=group_id, protocol="share", error=str(exc))
            return append_error_code(exc)

    # --- session expiry -------------------------------------------------------------------
    def on_due(self, group_id: str, now_ms: float) -> float | None:
        group = self.groups[group_id]
        counts = {name: count for name, (_, count) in self._topics().items()}
        before = group.records()
        for member in group.expire_sessions(group.assignable(counts), int(now_ms), self.coordinator.topic_metas()):
            log.info("group.member_expired", group=group_id, member=member, protocol="share")
            self._member_left(group_id, member)
        records = changes(before, group.records())
        nursery = self.coordinator._nursery
        if records and nursery is not None:
            nursery.start_soon(self._write_soon, group_id, records)
        return group.next_session_deadline()

    async def _write_soon(self, group_id: str, records: list[ShareGroupRecord]) -> None:
        from raftka.broker.group.group_coordinator import CoordinatorError

        try:
            partition = self.coordinator._partition(group_id)
        except CoordinatorError:
            return
        await self._append(partition, group_id, records)

    # --- admin ----------------------------------------------------------------------------
    def describe(self, group_id: str) -> tuple[int, str | None, ShareGroupState | None]:
        """ShareGroupDescribe: (error, message, group)."""
        from raftka.broker.group.group_coordinator import CoordinatorError

        try:
            if not group_id:
                raise CoordinatorError(int(ErrorCode.INVALID_GROUP_ID), "the group id is empty")
            self.coordinator._partition(group_id)
        except CoordinatorError as exc:
            return exc.code, str(exc), None
        group = self.groups.get(group_id)
        if group is None:
            message = (f"Group {group_id} is not a share group." if self.coordinator.other_group_type(group_id, "share")
                       else f"Group {group_id} not found.")
            return GROUP_ID_NOT_FOUND, message, None
        return 0, None, group

    def listed(self) -> list[ShareGroupState]:
        return [g for gid, g in self.groups.items() if self.coordinator._is_served(gid)]

    async def delete(self, group_id: str, persister: Persister) -> int:
        """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members; else its
        partitions' share state is deleted, then its records are tombstoned."""
        from raftka.broker.group.group_coordinator import CoordinatorError

        try:
            partition = self.coordinator._partition(group_id)
        except CoordinatorError as exc:
            return exc.code
        async with self._locks.setdefault(group_id, trio.Lock()):
            group = self.groups.get(group_id)
            if group is None:
                return GROUP_ID_NOT_FOUND
            if group.members:
                return NON_EMPTY_GROUP
            topics = self._topics()
            for topic, index in sorted(group.initialized | group.initializing):
                if topic not in topics:
                    continue
                try:
                    await persister.delete(ShareStateKey(group_id, uuid.UUID(topics[topic][0]), index))
                except PersisterError as exc:
                    return exc.code
            code = await self._append(partition, group_id, group.deletion_records())
            if code:
                return code
            if self.groups.get(group_id) is group:
                self.drop([group_id])
        self._forget(group_id)
        log.info("group.deleted", group=group_id, protocol="share")
        return 0

    # --- share group offsets (DescribeShareGroupOffsets, Alter..., Delete...) -------------
    def _offsets_group(self, group_id: str, *, create: bool) -> tuple[int, str | None, ShareGroupState | None]:
        """The share group an offsets request names: (error, message, group)."""
        from raftka.broker.group.group_coordinator import CoordinatorError

        try:
            if not group_id:
                raise CoordinatorError(int(ErrorCode.INVALID_GROUP_ID), "the group id is empty")
            self.coordinator._partition(group_id)
        except CoordinatorError as exc:
            return exc.code, str(exc), None
        if self.coordinator.other_group_type(group_id, "share"):
            return GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.", None
        group = self.groups.get(group_id)
        if group is None and not create:
            return GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        return 0, None, group or ShareGroupState(group_id)

    async def describe_offsets(self, group_id: str, topics: Mapping[str, list[int]] | None, persister: Persister,
                               ) -> tuple[int, str | None, dict[str, dict[int, tuple[int, int, int, str | None, int]]]]:
        """DescribeShareGroupOffsets for one group: (error, message, topic -> partition ->
        (start offset, leader epoch, error, message, delivery complete count)). `topics` None:
        every initialized partition. A partition never initialized has start offset -1; an
        unknown topic UNKNOWN_TOPIC_OR_PARTITION; an unknown delivery complete count is -1."""
        code, message, group = self._offsets_group(group_id, create=False)
        if group is None:
            return code, message, {}
        if topics is None:
            wanted: dict[str, list[int]] = {}
            for topic, index in sorted(group.initialized):
                wanted.setdefault(topic, []).append(index)
        else:
            wanted = dict(topics)
        known = self._topics()
        out: dict[str, dict[int, tuple[int, int, int, str | None, int]]] = {}
        for topic, partitions in wanted.items():
            rows = out.setdefault(topic, {})
            for index in partitions:
                if topic not in known or not 0 <= index < known[topic][1]:
                    rows[index] = (-1, -1, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                   "This server does not host this topic-partition.", -1)
                    continue
                if (topic, index) not in group.initialized:
                    rows[index] = (-1, -1, 0, None, -1)
                    continue
                try:
                    summary = await persister.read_summary(
                        ShareStateKey(group_id, uuid.UUID(known[topic][0]), index), -1)
                except PersisterError as exc:
                    rows[index] = (-1, -1, exc.code, exc.message or None, -1)
                    continue
                rows[index] = ((-1, -1, 0, None, -1) if summary is None
                               else (summary.start_offset, summary.leader_epoch, 0, None,
                                     summary.delivery_complete_count))
        return 0, None, out

    async def alter_offsets(self, group_id: str, offsets: Mapping[str, Mapping[int, int]], persister: Persister,
                            ) -> tuple[int, str | None, dict[str, dict[int, tuple[int, str | None]]]]:
        """AlterShareGroupOffsets: only on an empty share group (an unknown one is created
        empty, as Kafka does); each partition's share state is initialized at its new start
        offset, at a new state epoch (the group epoch, bumped). (error, message, topic ->
        partition -> (error, message))."""
        code, message, group = self._offsets_group(group_id, create=True)
        if group is None:
            return code, message, {}
        known = self._topics()
        lock = self._locks.setdefault(group_id, trio.Lock())
        async with lock:
            group = self.groups.get(group_id, group)
            if group.members:
                return NON_EMPTY_GROUP, "The group is not empty.", {}
            out: dict[str, dict[int, tuple[int, str | None]]] = {}
            valid = []
            for topic, partitions in offsets.items():
                for index, start in partitions.items():
                    if topic not in known or not 0 <= index < known[topic][1]:
                        out.setdefault(topic, {})[index] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                                            "The topic-partition does not exist.")
                    else:
                        valid.append((topic, index, start))
            before = group.records()
            state_epoch = group.group_epoch + 1
            done = []
            for topic, index, start in valid:
                try:
                    await persister.initialize(ShareStateKey(group_id, uuid.UUID(known[topic][0]), index),
                                               state_epoch, start)
                except PersisterError as exc:
                    out.setdefault(topic, {})[index] = (exc.code, exc.message or None)
                    continue
                out.setdefault(topic, {})[index] = (0, None)
                done.append((topic, index))
            if done:
                self._forget(group_id)
                group.offsets_reset(initialized=done)
                self.groups[group_id] = group
                code = await self._append_for(group_id, changes(before, group.records()))
                if code:
                    return code, "the group's records could not be written", {}
        return 0, None, out

    async def delete_offsets(self, group_id: str, topics: list[str], persister: Persister,
                             ) -> tuple[int, str | None, dict[str, tuple[int, str | None]]]:
        """DeleteShareGroupOffsets: only on an empty share group; each topic's share state is
        deleted (it is initialized again when a member next subscribes). (error, message,
        topic -> (error, message))."""
        code, message, group = self._offsets_group(group_id, create=False)
        if group is None:
            return code, message, {}
        known = self._topics()
        async with self._locks.setdefault(group_id, trio.Lock()):
            group = self.groups.get(group_id, group)
            if group.members:
                return NON_EMPTY_GROUP, "The group is not empty.", {}
            out: dict[str, tuple[int, str | None]] = {}
            before = group.records()
            gone = []
            for topic in topics:
                if topic not in known:
                    out[topic] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "The topic does not exist.")
                    continue
                out[topic] = (0, None)
                for tp in sorted(tp for tp in group.initialized | group.initializing if tp[0] == topic):
                    try:
                        await persister.delete(ShareStateKey(group_id, uuid.UUID(known[topic][0]), tp[1]))
                    except PersisterError as exc:
                        out[topic] = (exc.code, exc.message or None)
                        break
                    gone.append(tp)
            if gone:
                self._forget(group_id)
                group.offsets_reset(deleted=gone)
                code = await self._append_for(group_id, changes(before, group.records()))
                if code:
                    return code, "the group's records could not be written", {}
        return 0, None, out

    async def _append_for(self, group_id: str, records: list[ShareGroupRecord]) -> int:
        from raftka.broker.group.group_coordinator import CoordinatorError

        try:
            partition = self.coordinator._partition(group_id)
        except CoordinatorError as exc:
            return exc.code
        return await self._append(partition, group_id, records)
