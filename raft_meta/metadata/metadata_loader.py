"""Follows the quorum's committed records, applies them, publishes `(delta, image)`.

Also claims the controller role: when this voter is the Raft leader it
submits a `ControllerClaim` with its term; once that claim is applied here
while still leader in the same term, everything before it is applied too
and this node is the active controller (`active_controller_epoch()`).

Where the quorum replaced the records the loader needs by a snapshot (it starts after a
restart, or its voter received a full dump from the leader), it takes the quorum's image at
the last applied offset (the snapshot with the records after it applied) and publishes one
delta that names everything in it (`snapshot.snapshot_delta`), then applies the records that
follow.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog
import trio

from raftka.raft_meta.metadata.apply import apply_entry
from raftka.raft_meta.metadata.image import MetadataDelta, MetadataImage
from raftka.raft_meta.metadata.records import ControllerClaim, RecordBatch, encode_record
from raftka.raft_meta.metadata.snapshot import SnapshotError, snapshot_delta
from raftka.raft_meta.quorum.quorum import Quorum, Snapshot, SubmitError

log = structlog.get_logger("raft_meta.loader")

Publisher = Callable[[MetadataDelta, MetadataImage], None]


class ClusterIdMismatch(RuntimeError):
    """The quorum's metadata log belongs to another cluster than this node's storage."""


class MetadataLoader:
    def __init__(self, quorum: Quorum, cluster_id: str, publishers: list[Publisher] | None = None,
                 bootstrap: tuple[bytes, ...] = ()) -> None:
        self.quorum = quorum
        # Encoded records committed with the first claim of a new cluster (raft_meta/metadata/bootstrap_records.py).
        self.bootstrap = bootstrap
        self.cluster_id = cluster_id
        self.image = MetadataImage()
        self._publishers = list(publishers or [])
        self._applied = trio.Event()

    def add_publisher(self, publisher: Publisher) -> None:
        """`publisher(delta, new_image)` runs synchronously after each record (keep it quick)."""
        self._publishers.append(publisher)

    def active_controller_epoch(self) -> int | None:
        """This node's controller epoch if it is the active controller now, else None."""
        is_leader, term = self.quorum.leadership()
        controller = self.image.controller
        if is_leader and controller.node_id == self.quorum.node_id and controller.epoch == term:
            return term
        return None

    async def wait_active_controller(self) -> int:
        while (epoch := self.active_controller_epoch()) is None:
            await self._wait_applied_or_state_change()
        return epoch

    async def _wait_applied_or_state_change(self) -> None:
        # Capture both events before the first checkpoint so no wake-up is lost.
        events = (self._applied, self.quorum.state_change_event())
        async with trio.open_nursery() as nursery:
            for event in events:

                async def wait(event: trio.Event = event) -> None:
                    await event.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(wait)

    async def wait_for_offset(self, offset: int) -> MetadataImage:
        """Return the image once it includes `offset`."""
        while self.image.offset < offset:
            await self._applied.wait()
        return self.image

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Follow and claim until cancelled; raises `ClusterIdMismatch` (bare, not grouped)."""
        failure: list[ClusterIdMismatch] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._follow, failure, nursery.cancel_scope)
            nursery.start_soon(self._claim_controller)
            task_status.started()
        if failure:
            raise failure[0]

    async def _follow(self, failure: list[ClusterIdMismatch], scope: trio.CancelScope) -> None:
        async for committed in self.quorum.feed(self.image.offset + 1):
            if isinstance(committed, Snapshot):
                # The records up to its offset are gone (a restart, or a dump from the leader):
                # the snapshot is the image, and one delta naming everything in it is published.
                if committed.image is None:
                    log.error("metadata.snapshot_unreadable", offset=committed.offset, error=committed.error)
                    raise SnapshotError(committed.error or "snapshot unreadable")
                image = committed.image
                deltas = [snapshot_delta(self.image, image)]
                log.info("metadata.snapshot_loaded", offset=image.offset, topics=len(image.topics),
                         brokers=len(image.brokers))
            else:
                image, deltas = apply_entry(self.image, committed.decode(), committed.offset)
                for delta in deltas:
                    if not delta.accepted:
                        log.warning("metadata.record_skipped", offset=committed.offset, reason=delta.reason)
            self.image = image
            if image.cluster_id is not None and image.cluster_id != self.cluster_id:
                failure.append(ClusterIdMismatch(
                    f"the metadata quorum belongs to cluster {image.cluster_id!r} but this node's storage is "
                    f"formatted for cluster {self.cluster_id!r}; expected every voter formatted with the same "
                    "--cluster-id"
                ))
                log.error("metadata.cluster_id_mismatch", ours=self.cluster_id, quorum=image.cluster_id)
                scope.cancel()
                return
            for delta in deltas:
                for publisher in self._publishers:
                    try:
                        publisher(delta, image)
                    except Exception:
                        log.exception("metadata.publisher_failed", offset=committed.offset)
            event, self._applied = self._applied, trio.Event()
            event.set()

    def _log_is_empty(self) -> bool:
        """No cluster has been claimed yet in this metadata log (everything committed is applied
        here and none of it named a cluster)."""
        if self.image.cluster_id is not None:
            return False
        return self.image.offset >= self.quorum.last_offset

    async def _claim_controller(self) -> None:
        claimed_term = -1
        while True:
            is_leader, term = self.quorum.leadership()
            if is_leader and term != claimed_term and self.active_controller_epoch() is None:
                claim = ControllerClaim(self.quorum.node_id, term, self.cluster_id, request_id=f"claim-{self.quorum.node_id}-{term}")
                entry = claim
                if self.bootstrap and self._log_is_empty():
                    entry = RecordBatch((encode_record(claim), *self.bootstrap), request_id=claim.request_id)
                    log.info("controller.bootstrap_records", records=len(self.bootstrap))
                try:
                    offset = await self.quorum.submit(entry, timeout=2.0)
                    claimed_term = term
                    log.info("controller.claimed", node_id=self.quorum.node_id, epoch=term, offset=offset)
                except SubmitError as exc:
                    log.info("controller.claim_failed", epoch=term, reason=exc.reason)
                    # Leadership is probably moving; look again after the next change (or shortly).
                    with trio.move_on_after(0.1):
                        await self.quorum.wait_state_change()
                continue
            await self.quorum.wait_change()
