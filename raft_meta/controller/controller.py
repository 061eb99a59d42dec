"""The active controller: a thin trio shell around `controller_decisions`.

It acts only while `loader.active_controller_epoch()` says this node is the
active controller (its ControllerClaim for the current Raft term is
applied). Requests from brokers (the broker's control-channel RPC calls
these methods) raise `ControllerError(ErrorCode.NOT_CONTROLLER)` otherwise.
Decisions are made one at a time under a lock, on an image that includes
every record this controller submitted before, so they never race each
other; anything that still goes stale is rejected by `apply`.

Broker sessions live in memory (as in Kafka): a new active controller gives
every live broker a fresh session.

Liveness probes (`broker.liveness.probe.enable`) speed up the detection of a
crashed broker without replacing the session rule: when a broker's control
connection ends (`connection_lost`), or it has been quiet for 1.5 heartbeat
intervals (or has not reached a new controller yet), the controller connects
to the broker's advertised listeners. Only "connection refused" everywhere
proves the process gone and fences it at once (`broker.process_gone`); a hung,
paused or partitioned broker still answers or times out, and waits for its
session to expire as before.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import structlog
import trio

from raftka.client.protocol import ErrorCode
from raftka.raft_meta.config.config_catalogue import group_bounds
from raftka.raft_meta.config.node_config import STATIC_BROKER_KEYS, NodeConfig
from raftka.raft_meta.controller import controller_decisions as decide
from raftka.raft_meta.controller import leader_balance_decisions as leader_balance
from raftka.raft_meta.controller import reassignment_decisions as reassign
from raftka.raft_meta.controller import unregistration_decisions as unregistration
from raftka.raft_meta.controller.config_decisions import AlterResource, alter_configs
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.metadata.metadata_loader import MetadataLoader
from raftka.raft_meta.metadata.records import RecordBatch, encode_record
from raftka.raft_meta.quorum.liveness_probe import Reachability, probe_listeners
from raftka.raft_meta.quorum.quorum import Quorum, SubmitError
from raftka.raft_meta.security import acls as acl_decisions

log = structlog.get_logger("raft_meta.controller")

PROBE_TIMEOUT_S = 0.5  # per listener; a slower answer proves nothing anyway
PROBE_MIN_GAP_S = 0.1  # between two probes of one broker
# Probes per lost connection. A process killed with SIGKILL closes its sockets one by one as
# it exits: its control connection often ends a few ms before its listeners close (seen in
# about half of the bench's kills), so the first probe may still find the port open.
# Follow-ups PROBE_MIN_GAP_S apart catch it.
PROBES_PER_HINT = 4
# Quiet brokers are probed after 1.5 heartbeat intervals, but not more eagerly than this: a
# short interval on a busy machine must not turn every late heartbeat into a probe.
PROBE_QUIET_FLOOR_S = 0.5


# How long a call waits for its commit when its request names no deadline of its own.
DEFAULT_COMMIT_WAIT_S = 5.0
# A request with timeout_ms <= 0 ("do not wait for the topic to propagate", in Kafka) still waits
# for its commit, up to this (Kafka's default request.timeout.ms).
NO_TIMEOUT_COMMIT_WAIT_S = 30.0
# How long a commit task waits for the quorum's verdict on its entry (pysyncobj reports success,
# or a leader change, well before this unless the process is starved).
COMMIT_OUTCOME_TIMEOUT_S = 120.0


def _deadline(timeout_ms: int | None) -> float | None:
    """The trio deadline of a request's `timeout_ms` (None: the call's default)."""
    if timeout_ms is None:
        return None
    return trio.current_time() + (timeout_ms / 1000.0 if timeout_ms > 0 else NO_TIMEOUT_COMMIT_WAIT_S)


@dataclass(frozen=True)
class TopicResult:
    """One topic's outcome in a CreateTopics / CreatePartitions request."""

    name: str
    error: ControllerError | None = None
    topic_id: str | None = None


@dataclass
class _Commit:
    """One submitted entry; `done` is set once its outcome (`image` or `error`) is known."""

    what: str
    done: trio.Event
    image: MetadataImage | None = None
    error: ControllerError | None = None


@dataclass(frozen=True)
class HeartbeatReply:
    fenced: bool
    shutdown_ready: bool  # a broker that asked to shut down may now stop


class Controller:
    def __init__(self, config: NodeConfig, quorum: Quorum, loader: MetadataLoader) -> None:
        self.config = config
        self.quorum = quorum
        self.loader = loader
        self._lock = trio.Lock()
        self._pending: _Commit | None = None  # the last submitted entry, until its outcome is known
        self._tasks: trio.Nursery | None = None  # run's nursery: commit tasks outlive their requests
        self._last_heartbeat: dict[int, float] = {}
        self._epoch: int | None = None
        self._heard_from: set[int] = set()
        # Liveness probing (reset when this node becomes the active controller).
        self._heard_at: dict[int, float] = {}  # broker -> when this controller last heard from it
        self._hints: dict[int, int] = {}  # broker whose control connection ended -> probes still owed
        self._last_probe: dict[int, float] = {}
        self._probing: set[int] = set()
        self._probe_wakeup = trio.Event()
        self.probes: dict[str, int] = {r.value: 0 for r in Reachability}  # outcomes, for tests and status

    @property
    def image(self) -> MetadataImage:
        return self.loader.image

    def _require_active(self) -> int:
        epoch = self.loader.active_controller_epoch()
        if epoch is None:
            raise ControllerError(ErrorCode.NOT_CONTROLLER, f"node {self.quorum.node_id} is not the active controller")
        return epoch

    async def _decide_and_commit(self, make_decision, deadline: float | None = None) -> MetadataImage:
        """Decide on the current image and commit the records; the image that includes them.

        Waits for the commit until `deadline` (trio time; default DEFAULT_COMMIT_WAIT_S from
        now), then raises REQUEST_TIMED_OUT: the outcome is still pending, not a failure. The
        commit itself goes on in `run`'s nursery, and the next decision waits for its outcome
        first, so every decision is still made on an image that includes every record this
        controller submitted before (a retry of a slow CreateTopics sees the topic it created).
        """
        if deadline is None:
            deadline = trio.current_time() + DEFAULT_COMMIT_WAIT_S
        waiting_for = "an earlier metadata change to commit"
        with trio.move_on_at(deadline):
            async with self._lock:
                if self._pending is not None:
                    await self._pending.done.wait()
                    self._pending = None
                epoch = self._require_active()
                decision = make_decision(self.image)
                for event, fields in decision.warnings:
                    log.warning(event, **fields)
                if not decision.records:
                    return self.image
                commit = self._pending = self._start_commit(decision.records, epoch)
                waiting_for = f"the commit of {commit.what}"
                await commit.done.wait()
                self._pending = None
                if commit.error is not None:
                    raise commit.error
                assert commit.image is not None
                return commit.image
        raise ControllerError(ErrorCode.REQUEST_TIMED_OUT, f"still waiting for {waiting_for} at the request's deadline; "
                                                           "it may yet complete: look before retrying")

    def _start_commit(self, records: tuple, epoch: int) -> _Commit:
        """Submit one decision as one Raft entry (all of its records apply together, or none do)
        in a task of `run`'s nursery, which outlives the request that asked for it."""
        what = f"{type(records[0]).__name__}{'' if len(records) == 1 else f' and {len(records) - 1} more'}"
        if self.loader.active_controller_epoch() != epoch:
            raise ControllerError(ErrorCode.NOT_CONTROLLER, f"lost the controller role (epoch {epoch}) before committing")
        if self._tasks is None:
            raise ControllerError(ErrorCode.NOT_CONTROLLER, "the controller loop is not running")
        entry = records[0] if len(records) == 1 else RecordBatch(tuple(encode_record(r) for r in records))
        commit = _Commit(what, trio.Event())
        self._tasks.start_soon(self._run_commit, commit, entry)
        return commit

    async def _run_commit(self, commit: _Commit, entry) -> None:
        try:
            offset = await self.quorum.submit(entry, timeout=COMMIT_OUTCOME_TIMEOUT_S)
            commit.image = await self.loader.wait_for_offset(offset)
        except SubmitError as exc:
            if exc.reason == "TIMEOUT":
                log.warning("controller.commit_outcome_unknown", records=commit.what, waited_s=COMMIT_OUTCOME_TIMEOUT_S)
                commit.error = ControllerError(ErrorCode.REQUEST_TIMED_OUT, f"no outcome for the commit of {commit.what} "
                                                                            f"within {COMMIT_OUTCOME_TIMEOUT_S} s; it may yet "
                                                                            "commit: look before retrying")
            else:
                commit.error = ControllerError(ErrorCode.NOT_CONTROLLER, f"could not commit {commit.what}: {exc.reason}")
        finally:
            if commit.image is None and commit.error is None:
                commit.error = ControllerError(ErrorCode.NOT_CONTROLLER, f"the controller stopped before the commit of "
                                                                         f"{commit.what} was known")
            commit.done.set()

    # --- requests from brokers ---
    async def register_broker(
        self, broker_id: int, incarnation_id: str, listeners: tuple[tuple[str, str, int], ...], rack: str | None
    ) -> int:
        """Returns the new broker epoch. The broker starts fenced until a caught-up heartbeat."""
        # Only a heartbeat this controller really received proves another incarnation is alive; the
        # session granted to every registered broker on activation does not (else a restarted broker
        # that was the controller itself would wait a whole session timeout to re-register).
        alive = (broker_id in self._heard_from
                 and trio.current_time() - self._last_heartbeat.get(broker_id, float("-inf")) <= self._session_s)
        image = await self._decide_and_commit(
            lambda img: decide.register_broker(img, broker_id, incarnation_id, listeners, rack, alive,
                                               unclean_default=self.config.unclean_leader_election_enable)
        )
        self._last_heartbeat[broker_id] = self._heard_at[broker_id] = trio.current_time()
        return image.brokers[broker_id].epoch

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_shutdown: bool = False) -> HeartbeatReply:
        """`metadata_offset`: the last metadata offset the broker has applied."""
        self._require_active()
        # The epoch first: a heartbeat of an older registration (late, or replayed) must not
        # keep the current one's session alive.
        decide.check_broker_epoch(self.image, broker_id, broker_epoch)
        self._last_heartbeat[broker_id] = self._heard_at[broker_id] = trio.current_time()
        self._heard_from.add(broker_id)
        unclean = self.config.unclean_leader_election_enable
        if want_shutdown:
            image = await self._decide_and_commit(
                lambda img: decide.controlled_shutdown(img, broker_id, broker_epoch, unclean)
            )
            leads = any(
                p.leader == broker_id for t in image.topics.values() for p in t.partitions.values()
            )
            return HeartbeatReply(fenced=True, shutdown_ready=not leads)
        def decision(img: MetadataImage) -> decide.Decision:
            return decide.broker_heartbeat(img, broker_id, broker_epoch, metadata_offset >= broker_epoch, unclean)

        # Most heartbeats change nothing: answer those at once instead of queueing behind
        # commits under the lock (a slow commit must not make live brokers miss their session).
        if not decision(self.image).records:
            return HeartbeatReply(fenced=self.image.brokers[broker_id].fenced, shutdown_ready=False)
        image = await self._decide_and_commit(decision)
        return HeartbeatReply(fenced=image.brokers[broker_id].fenced, shutdown_ready=False)

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic_id: str, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]) -> tuple[int, int]:
        """Returns the partition's (leader epoch, partition epoch) after the change."""
        image = await self._decide_and_commit(
            lambda img: decide.alter_partition(img, broker_id, broker_epoch, topic_id, partition, leader_epoch,
                                               partition_epoch, new_isr)
        )
        part = image.partition(topic_id, partition)
        assert part is not None
        return part.leader_epoch, part.partition_epoch

    async def create_topics(self, topics: Sequence[decide.NewTopic], timeout_ms: int | None = None,
                            request_ids: Mapping[str, str] | None = None) -> list[TopicResult]:
        """One CreateTopics request, committed as one entry; a result per topic, in order.

        Defaults: num.partitions, default.replication.factor. Raises ControllerError for the
        whole request: POLICY_VIOLATION (over MAX_RECORDS_PER_USER_OP, nothing committed),
        REQUEST_TIMED_OUT (not committed by `timeout_ms`, see `_decide_and_commit`),
        NOT_CONTROLLER. A topic is reported created only if the committed image holds it with
        the id this request gave it.
        """
        topics = list(topics)
        ids: dict[int, str] = {}  # drawn only for the topics a decision creates
        refused: dict[str, ControllerError] = {}

        def decision(img: MetadataImage) -> decide.Decision:
            # Rotate the first leader by topic count so small topics do not all start on one broker.
            made, errors = decide.create_topics(img, topics, lambda i: ids.setdefault(i, str(uuid.uuid4())),
                                                self.config.num_partitions,
                                                self.config.default_replication_factor, start=len(img.topics),
                                                request_ids=request_ids)
            refused.clear()
            refused.update(errors)
            return made

        image = await self._decide_and_commit(decision, _deadline(timeout_ms))
        results = []
        for i, topic in enumerate(topics):
            error, topic_id = refused.get(topic.name), ids.get(i)
            if error is None and image.topic_ids.get(topic.name) != topic_id:
                error = ControllerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} was created by another "
                                                                        "request meanwhile")
            results.append(TopicResult(topic.name, error, None if error else topic_id))
        return results

    async def create_topic(self, name: str, num_partitions: int | None = None, replication_factor: int | None = None,
                           configs: dict[str, str] | None = None, request_id: str | None = None,
                           timeout_ms: int | None = None) -> str:
        """`create_topics` for one topic: its new id, or its error raised.

        Pass the client's request id so an ambiguous retry is deduplicated.
        """
        [result] = await self.create_topics([decide.NewTopic(name, num_partitions, replication_factor, configs or {})],
                                            timeout_ms, None if request_id is None else {name: request_id})
        if result.error is not None:
            raise result.error
        assert result.topic_id is not None
        return result.topic_id

    async def create_partitions(self, totals: Sequence[tuple[str, int]],
                                timeout_ms: int | None = None,
                                assignments: Mapping[str, Sequence[tuple[int, ...]]] | None = None,
                                ) -> list[TopicResult]:
        """One CreatePartitions request, committed as one entry; a result per topic, in order.
        Whole-request errors are raised as in `create_topics`. `assignments`: manual replica
        lists of the new partitions, by topic."""
        totals = [(name, int(total)) for name, total in totals]
        refused: dict[str, ControllerError] = {}

        def decision(img: MetadataImage) -> decide.Decision:
            made, errors = decide.create_partitions_batch(img, totals, start=len(img.topics),
                                                          assignments=assignments)
            refused.clear()
            refused.update(errors)
            return made

        image = await self._decide_and_commit(decision, _deadline(timeout_ms))
        results = []
        for name, total in totals:
            error = refused.get(name)
            topic = image.topic_by_name(name)
            if error is None and (topic is None or len(topic.partitions) < total):
                error = ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} changed meanwhile; "
                                                                              "its partitions were not added")
            results.append(TopicResult(name, error))
        return results

    async def alter_configs(self, resources: Sequence[AlterResource],
                            timeout_ms: int | None = None) -> list[ControllerError | None]:
        """One AlterConfigs / IncrementalAlterConfigs request, committed as one entry; the
        error of each resource (None: changed), in order. Whole-request errors raised."""
        resources = list(resources)
        refused: dict[int, ControllerError] = {}
        static_keys = frozenset(self.config.raw) | STATIC_BROKER_KEYS
        bounds = group_bounds(self.config.raw)

        def decision(img: MetadataImage) -> decide.Decision:
            made, errors = alter_configs(img, resources, static_keys, bounds)
            refused.clear()
            refused.update(errors)
            return made

        await self._decide_and_commit(decision, _deadline(timeout_ms))
        return [refused.get(i) for i in range(len(resources))]

    async def elect_leaders(self, election_type: int, partitions: Sequence[tuple[str, int]] | None,
                            timeout_ms: int | None = None) -> list[tuple[str, int, ControllerError | None]]:
        """One ElectLeaders request, committed as one entry: (topic, partition, error) per
        partition reported (see `controller_decisions.elect_leaders`)."""
        outcome: dict[tuple[str, int], ControllerError | None] = {}

        def decision(img: MetadataImage) -> decide.Decision:
            made, results = decide.elect_leaders(img, election_type, partitions)
            outcome.clear()
            outcome.update(results)
            return made

        await self._decide_and_commit(decision, _deadline(timeout_ms))
        return [(name, index, error) for (name, index), error in outcome.items()]

    async def delete_topic(self, name: str, request_id: str | None = None, timeout_ms: int | None = None) -> None:
        await self._decide_and_commit(lambda img: decide.delete_topic(img, name, request_id), _deadline(timeout_ms))

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        image = await self._decide_and_commit(lambda img: decide.allocate_producer_ids(img, broker_id, broker_epoch))
        return image.producer_id_blocks[broker_id]

    async def create_acls(self, acls: Sequence[Sequence]) -> list[list]:
        """One CreateAcls request (ACLs as `AclBinding.to_wire()` lists), committed as one entry;
        per ACL `[error name, message]` or `[None, None]`. Exact duplicates of stored ACLs
        succeed and write nothing. Whole-request errors raised (POLICY_VIOLATION over
        MAX_RECORDS_PER_USER_OP, REQUEST_TIMED_OUT, NOT_CONTROLLER)."""
        bindings = [acl_decisions.AclBinding.from_wire(a) for a in acls]
        outcomes: list[acl_decisions.AclOutcome] = []

        def decision(img: MetadataImage) -> decide.Decision:
            records, made = acl_decisions.create_acls(img.acls, bindings, lambda _: str(uuid.uuid4()))
            _check_user_op(len(records), "this CreateAcls request")
            outcomes[:] = made
            return decide.Decision(records)

        await self._decide_and_commit(decision)
        return [[None, None] if o.error is None else list(o.error) for o in outcomes]

    async def delete_acls(self, filters: Sequence[Sequence]) -> list[dict]:
        """One DeleteAcls request (filters as `AclFilter.to_wire()` lists), committed as one
        entry; per filter `{"error": [name, message] | None, "deleted": [ACL wire lists]}`."""
        parsed = [acl_decisions.AclFilter.from_wire(f) for f in filters]
        outcomes: list[acl_decisions.AclOutcome] = []

        def decision(img: MetadataImage) -> decide.Decision:
            records, made = acl_decisions.delete_acls(img.acls, parsed)
            _check_user_op(len(records), "this DeleteAcls request")
            outcomes[:] = made
            return decide.Decision(records)

        await self._decide_and_commit(decision)
        return [{"error": None if o.error is None else list(o.error), "deleted": [b.to_wire() for b in o.deleted]}
                for o in outcomes]
    async def alter_scram_credentials(self, deletions: list, upsertions: list) -> list:
        """AlterUserScramCredentials (raft_meta/security/scram_decisions.py): a ScramResult per user."""
        from raftka.raft_meta.security import scram_decisions

        outcome: list = []

        def decision(img: MetadataImage) -> decide.Decision:
            records, results = scram_decisions.alter_scram_credentials(img, deletions, upsertions)
            outcome[:] = results
            return decide.Decision(tuple(records))

        await self._decide_and_commit(decision)
        return outcome

    async def alter_client_quotas(self, alterations: list, validate_only: bool = False) -> list:
        """AlterClientQuotas (raft_meta/controller/quota_decisions.py): a QuotaResult per entry, in order; the
        changes of every valid entry commit as one entry (Kafka's atomic ControllerResult)."""
        from raftka.raft_meta.controller import quota_decisions as client_quotas

        outcome: list = []

        def decision(img: MetadataImage) -> decide.Decision:
            records, results = client_quotas.alter_client_quotas(img.client_quotas, alterations)
            _check_user_op(len(records), "this AlterClientQuotas request")
            outcome[:] = results
            return decide.Decision(() if validate_only else tuple(records))

        await self._decide_and_commit(decision)
        return outcome

    async def alter_partition_reassignments(self, reassignments: Sequence[Sequence], allow_rf_change: bool = True,
                                            timeout_ms: int | None = None) -> list[list]:
        """One AlterPartitionReassignments request (`[topic, partition, replicas or None]` each),
        committed as one entry (raft_meta/controller/reassignment_decisions.py); per partition `[topic, partition,
        error name or None, message or None]`, in order. Whole-request errors raised
        (POLICY_VIOLATION, REQUEST_TIMED_OUT, NOT_CONTROLLER)."""
        asked = [reassign.Reassignment(str(t), int(p), None if r is None else tuple(int(b) for b in r))
                 for t, p, r in reassignments]
        refused: dict[tuple[str, int], ControllerError] = {}

        def decision(img: MetadataImage) -> decide.Decision:
            made = reassign.alter_partition_reassignments(img, asked, allow_rf_change)
            refused.clear()
            refused.update(made.errors)
            for record in made.records:
                log.info("partition.reassignment", topic=img.topics[record.topic_id].name,
                         partition=record.partition, replicas=list(record.replicas or ()),
                         adding=list(record.adding_replicas or ()), removing=list(record.removing_replicas or ()))
            return decide.Decision(made.records, made.warnings)

        await self._decide_and_commit(decision, _deadline(timeout_ms))
        out = []
        for r in asked:
            error = refused.get((r.topic, r.partition))
            out.append([r.topic, r.partition, None if error is None else error.name,
                        None if error is None else error.message])
        return out

    async def unregister_broker(self, broker_id: int) -> None:
        """UnregisterBroker (raft_meta/controller/unregistration_decisions.py): BROKER_ID_NOT_REGISTERED if unknown."""
        log.info("broker.unregister_requested", broker_id=broker_id)
        await self._decide_and_commit(lambda img: unregistration.unregister_broker(img, broker_id))
        self._last_heartbeat.pop(broker_id, None)

    def connection_lost(self, broker_id: int) -> None:
        """A control connection that carried `broker_id`'s registration or heartbeats ended.

        Only a hint: the broker is probed soon, and fenced only if the probe proves its
        process gone. Safe to call from any trio task, active controller or not.
        """
        if self.loader.active_controller_epoch() is None or not self.config.broker_liveness_probe_enable:
            return
        self._hints[broker_id] = PROBES_PER_HINT
        self._probe_wakeup.set()

    # --- the background loop ---
    @property
    def _session_s(self) -> float:
        return self.config.broker_session_timeout_ms / 1000.0

    @property
    def _quiet_after_s(self) -> float:
        return max(1.5 * self.config.broker_heartbeat_interval_ms / 1000.0, PROBE_QUIET_FLOOR_S)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Forever: wait to become active, then police sessions and leader balance
        (and probe the liveness of brokers, if enabled)."""
        async with trio.open_nursery() as nursery:
            self._tasks = nursery
            try:
                if self.config.broker_liveness_probe_enable:
                    nursery.start_soon(self._probe_loop)
                task_status.started()
                while True:
                    epoch = await self.loader.wait_active_controller()
                    if epoch != self._epoch:
                        now = trio.current_time()
                        self._last_heartbeat = {b.broker_id: now for b in self.image.live_brokers()}
                        self._heard_from = set()
                        self._heard_at, self._hints, self._last_probe = {}, {}, {}
                        self._epoch = epoch  # last: the probe loop acts only once the state above is fresh
                        self._probe_wakeup.set()
                        log.info("controller.active", node_id=self.quorum.node_id, epoch=epoch)
                    try:
                        await self._police(epoch)
                    except ControllerError as exc:
                        event = "controller.inactive" if exc.name == "NOT_CONTROLLER" else "controller.police_retry"
                        log.info(event, epoch=epoch, error=exc.name, reason=exc.message)
            finally:
                self._tasks = None

    async def _police(self, epoch: int) -> None:
        tick = min(self.config.broker_heartbeat_interval_ms / 1000.0, self._session_s / 4)
        next_rebalance = trio.current_time() + self.config.leader_imbalance_check_interval_seconds
        while self.loader.active_controller_epoch() == epoch:
            unclean = self.config.unclean_leader_election_enable
            for broker_id in decide.expired_brokers(self.image, self._last_heartbeat, trio.current_time(),
                                                    self.config.broker_session_timeout_ms):
                log.warning("broker.session_expired", broker_id=broker_id)
                await self._decide_and_commit(lambda img, b=broker_id, u=unclean: decide.fence_broker(img, b, u))
            if reassign.pending_completions(self.image):  # rare: see its docstring
                await self._decide_and_commit(lambda img: decide.Decision(reassign.pending_completions(img)))
            if self.config.auto_leader_rebalance_enable and trio.current_time() >= next_rebalance:
                next_rebalance = trio.current_time() + self.config.leader_imbalance_check_interval_seconds
                percentage = self.config.leader_imbalance_per_broker_percentage
                await self._decide_and_commit(lambda img, p=percentage: leader_balance.rebalance_leaders(img, p))
            with trio.move_on_after(tick):
                await self.quorum.wait_state_change()

    async def _probe_loop(self) -> None:
        """Start the probes `decide.brokers_to_probe` asks for, on a hint or every gap."""
        async with trio.open_nursery() as probes:
            while True:
                with trio.move_on_after(PROBE_MIN_GAP_S):
                    await self._probe_wakeup.wait()
                self._probe_wakeup = trio.Event()
                epoch = self.loader.active_controller_epoch()
                if epoch is None:
                    self._hints.clear()
                    await self.loader.wait_active_controller()
                    continue
                if epoch != self._epoch:
                    continue  # `run` has not reset the per-controller state yet; it wakes us when it has
                now = trio.current_time()
                for broker_id in [b for b in self._hints if not self.image.is_live(b)]:
                    del self._hints[broker_id]  # fenced meanwhile: nothing left to find out
                for broker_id in decide.brokers_to_probe(self.image, self._heard_at, self._hints, self._last_probe,
                                                         self._probing, now, self._quiet_after_s, PROBE_MIN_GAP_S):
                    if self._hints.get(broker_id, 0) > 1:
                        self._hints[broker_id] -= 1
                    else:
                        self._hints.pop(broker_id, None)
                    self._last_probe[broker_id] = now
                    self._probing.add(broker_id)
                    probes.start_soon(self._probe, broker_id, epoch)

    async def _probe(self, broker_id: int, epoch: int) -> None:
        try:
            broker = self.image.brokers.get(broker_id)
            if broker is None:
                return
            result = await probe_listeners(broker.listeners, PROBE_TIMEOUT_S)
            self.probes[result.value] += 1
            log.info("broker.liveness_probe", broker_id=broker_id, broker_epoch=broker.epoch, result=result.value)
            if result is not Reachability.REFUSED or self.loader.active_controller_epoch() != epoch:
                return
            unclean = self.config.unclean_leader_election_enable

            def decision(img: MetadataImage) -> decide.Decision:
                return decide.fence_gone_broker(img, broker_id, broker.epoch, unclean)

            if decision(self.image).records:
                log.warning("broker.process_gone", broker_id=broker_id, broker_epoch=broker.epoch,
                            listeners=[f"{name}://{host}:{port}" for name, host, port in broker.listeners])
                await self._decide_and_commit(decision)
        except ControllerError as exc:
            log.info("broker.liveness_probe_abandoned", broker_id=broker_id, reason=exc.message)
        finally:
            self._probing.discard(broker_id)


def _check_user_op(records: int, what: str) -> None:
    if records > decide.MAX_RECORDS_PER_USER_OP:
        raise ControllerError(ErrorCode.POLICY_VIOLATION, f"{what} would write {records} metadata records; one request "
                                                          f"may write at most {decide.MAX_RECORDS_PER_USER_OP} (Kafka's "
                                                          "MAX_RECORDS_PER_USER_OP), so nothing was changed")
