"""A partition replica's replication state and Kafka's HW/ISR rules, with no I/O.

The pure core under `broker/replication/partition.py` (which owns the log, the trio events and
the clock). It reads no clock, file or socket: the caller passes the time
(`now_ms`), the leader's log end offset and the metadata, and gets back effects
to act on. Kafka's `Partition.scala` / `Replica.scala` rules, by name:

- Role, epochs, replicas and ISR come only from the metadata image (`apply`).
  Becoming leader (a new leader, or a new leader epoch) resets what is known
  of every follower: log end unknown (-1), last caught up "now" for ISR
  members and "never" for the others (`Replica.resetReplicaState`), so a
  follower outside the ISR cannot hold the HW back after an election.
- `on_fetch`: a follower's fetch offset is its log end. It is caught up at
  this fetch if it reached the leader's log end, or since its previous fetch
  if it reached the leader's log end of then (`updateFetchStateOrThrow`).
- High watermark (`maybeIncrementLeaderHW`): the minimum log end over the
  *maximal* ISR (the ISR plus replicas whose addition is pending, KIP-497),
  and over followers outside it that are caught up (within
  `replica.lag.time.max.ms`): without the latter a follower under steady load
  never reaches a HW that runs with the leader's log end, and never rejoins
  (KAFKA-7128). The HW never moves backwards.
- Caught up enough to join the ISR (`isFollowerInSync`): log end ≥ HW and ≥
  the start offset of the leader's current epoch, so a new member holds
  every entry of earlier epochs the leader has.
- Out of sync (`isFollowerOutOfSync`): an ISR follower whose log end is not
  the leader's and that has not been caught up for more than
  `replica.lag.time.max.ms`. A follower at the leader's log end stays, even
  if idle (Kafka; a dead broker leaves the ISR when the controller fences it).
- One ISR change in flight at a time (`isr_changes` records it as pending
  until the controller's answer arrives through `apply` with a newer partition
  or leader epoch, or `alter_failed`). An image with the same epochs (a broker
  fenced, a config changed) leaves it pending: the controller has not decided.
- ISR eligibility (KIP-841's `isReplicaIsrEligible`): a replica whose broker is
  fenced or unregistered is ineligible. A controlled shutdown fences the broker
  in the same metadata entry that takes it out of every ISR, so "shutting down"
  is "fenced" here. An ineligible replica is never proposed for the ISR and,
  outside it, never holds the HW back (the KAFKA-7128 rule applies to eligible
  followers only), so acks=all goes on with the rest of the ISR. Outside the
  ISR, its fetches are not recorded, and what was known of it is forgotten
  when it becomes so: it rejoins only after a fetch made once it is unfenced
  again (a restarted broker is unfenced only once it has caught up with the
  metadata) shows it in sync, never on what its previous incarnation fetched.
  An ISR member counts as in Kafka, fenced or not (after a crash of every node,
  each registers again, fenced, still in the ISRs; the controller drops a
  fenced broker from every ISR it can).
- `min.insync.replicas`: acks=all appends are refused while the committed ISR
  is smaller; a replicated acks=all append fails with
  NOT_ENOUGH_REPLICAS_AFTER_APPEND if the maximal ISR shrank below it
  (`checkEnoughReplicasReachOffset`).

Not modelled: KIP-903's broker epoch in the follower's fetch (an ineligible
replica's fetches are ignored instead, see above) and KIP-966's eligible leader
replicas.

As follower, the HW is the leader's, capped at the local log end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raftka.broker.invariants import checked


class NotAReplica(Exception):
    """A fetch from a broker that is not a follower of this leader."""


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (times in ms of the caller's clock)."""

    log_end_offset: int = -1  # unknown until its first fetch at this leader epoch
    last_caught_up_ms: float | None = None  # None: not caught up since this replica became leader
    last_fetch_leader_leo: int = -1
    last_fetch_ms: float | None = None

    def is_caught_up(self, leader_leo: int, now_ms: float, lag_ms: float) -> bool:
        """Kafka's `ReplicaState.isCaughtUp`."""
        return self.log_end_offset == leader_leo or (
            self.last_caught_up_ms is not None and now_ms - self.last_caught_up_ms <= lag_ms)


@dataclass(frozen=True, slots=True)
class PartitionAssignment:
    """The metadata image's view of a partition (`raft_meta.image.PartitionImage`'s fields)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # Replicas whose broker is fenced (or shutting down, which fences it) or unregistered:
    # not eligible for the ISR (KIP-841). From the image's brokers, not the partition's record.
    ineligible: tuple[int, ...] = ()


# -- effects ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class HighWatermarkChanged:
    old: int
    new: int


@dataclass(frozen=True, slots=True)
class BecameLeader:
    leader_epoch: int
    epoch_start_offset: int


@dataclass(frozen=True, slots=True)
class BecameFollower:
    leader: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class StoppedLeading:
    """Was leader, now neither leader nor follower of a live leader (leader -1)."""

    leader_epoch: int


@dataclass(frozen=True, slots=True)
class CanJoinIsr:
    """A follower outside the ISR is caught up enough to join it (an expansion is due)."""

    replica: int


@dataclass(frozen=True, slots=True)
class FetchBeyondLogEnd:
    """A follower fetched past the leader's log end (divergent): not recorded; it truncates."""

    replica: int
    fetch_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class AlterIsr:
    """Ask the controller for `new_isr` (now pending): `removed` lag, `added` caught up."""

    new_isr: tuple[int, ...]
    removed: tuple[int, ...]
    added: tuple[int, ...]


Effect = HighWatermarkChanged | BecameLeader | BecameFollower | StoppedLeading | CanJoinIsr | FetchBeyondLogEnd | AlterIsr


@dataclass(slots=True)
class ReplicaState:
    """One replica's replication state; every mutator returns the effects it caused."""

    local_id: int
    lag_ms: float  # replica.lag.time.max.ms
    high_watermark: int = 0
    log_end_offset: int = 0
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    pending_isr: tuple[int, ...] | None = None  # an AlterPartition in flight
    min_insync_replicas: int = 1
    epoch_start_offset: int = -1  # as leader: where the current leader epoch starts
    followers: dict[int, FollowerState] = field(default_factory=dict)
    ineligible: frozenset[int] = frozenset()  # see PartitionAssignment.ineligible

    def __post_init__(self) -> None:
        self.high_watermark = min(self.high_watermark, self.log_end_offset)

    @property
    def is_leader(self) -> bool:
        return self.leader == self.local_id

    def _check_invariants(self) -> None:
        """Self-checks after every transition (AssertionError names the broken one): HW <= the
        local log end; the ISR within the replicas; as leader, itself in the ISR and in any
        pending ISR, and a follower state for exactly the other replicas; else no followers.
        (HW <= every ISR follower's log end holds when the HW moves, not always after: a
        follower's log end is unknown after an election, and a restarted follower may fetch
        from below the HW, which never moves back.)"""
        where = f"replica {self.local_id} (leader {self.leader}, epoch {self.leader_epoch})"
        if self.high_watermark > self.log_end_offset:
            raise AssertionError(f"{where}: HW {self.high_watermark} > log end {self.log_end_offset}")
        if not set(self.isr) <= set(self.replicas):
            raise AssertionError(f"{where}: ISR {list(self.isr)} not within replicas {list(self.replicas)}")
        if not self.is_leader:
            if self.followers:
                raise AssertionError(f"{where}: not leading but tracks followers {sorted(self.followers)}")
            return
        if self.local_id not in self.isr:
            raise AssertionError(f"{where}: the leader is not in ISR {list(self.isr)}")
        if self.pending_isr is not None and (self.local_id not in self.pending_isr
                                             or not set(self.pending_isr) <= set(self.replicas)):
            raise AssertionError(f"{where}: pending ISR {list(self.pending_isr)} must hold the leader and "
                                 f"replicas only ({list(self.replicas)})")
        if set(self.followers) != set(self.replicas) - {self.local_id}:
            raise AssertionError(f"{where}: follower states {sorted(self.followers)} are not the other "
                                 f"replicas of {list(self.replicas)}")

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The ISR plus replicas whose addition is pending (KIP-497's maximal ISR)."""
        if self.pending_isr is None:
            return frozenset(self.isr)
        return frozenset(self.isr) | frozenset(self.pending_isr)

    # -- metadata ------------------------------------------------------------------------

    @checked
    def apply(self, part: PartitionAssignment, *, min_insync_replicas: int, now_ms: float,
              log_end_offset: int, epoch_start_offset: int) -> list[Effect]:
        """Take the role, epochs and ISR the metadata says (a committed ISR change included).

        `epoch_start_offset`: where `part.leader_epoch` starts in the local log (its log end
        if the epoch is new to it); used only if this replica leads. A pending ISR change is
        over if the partition or leader epoch moved: the controller committed it (this is
        it) or a newer change supersedes it (its request, on the old epoch, will be refused).
        With the same epochs (only `ineligible` or the config changed) it stays pending."""
        was_leader, old_epoch, old_leader = self.is_leader, self.leader_epoch, self.leader
        ignored_before = self._ignored()
        new_term = old_epoch != part.leader_epoch or old_leader != part.leader
        if new_term or part.partition_epoch != self.partition_epoch:
            self.pending_isr = None
        self.leader, self.leader_epoch, self.partition_epoch = part.leader, part.leader_epoch, part.partition_epoch
        self.replicas, self.isr = part.replicas, part.isr
        self.min_insync_replicas = min_insync_replicas
        self.log_end_offset = log_end_offset
        self.ineligible = frozenset(part.ineligible)
        effects: list[Effect] = []
        if self.is_leader and (not was_leader or new_term):
            self.epoch_start_offset = epoch_start_offset
            self.followers = {r: FollowerState(last_caught_up_ms=now_ms if r in self.isr else None)
                              for r in self.replicas if r != self.local_id}
            effects.append(BecameLeader(self.leader_epoch, epoch_start_offset))
        elif self.is_leader:  # same term: a reassignment may add replicas
            self.followers = {r: self.followers.get(r) or FollowerState()
                              for r in self.replicas if r != self.local_id}
            for r in (self._ignored() - ignored_before) & self.followers.keys():
                self.followers[r] = FollowerState()  # forget it: it rejoins on fresh fetches only
        else:
            self.followers = {}
            self.epoch_start_offset = -1
            if self.leader >= 0 and (was_leader or new_term):
                effects.append(BecameFollower(self.leader, self.leader_epoch))
            elif was_leader:
                effects.append(StoppedLeading(old_epoch))
        if self.is_leader:
            effects += self._maybe_advance_high_watermark(now_ms)
        return effects

    # -- leader side ---------------------------------------------------------------------

    @checked
    def on_append(self, log_end_offset: int, now_ms: float) -> list[Effect]:
        """The leader appended: its log now ends at `log_end_offset`."""
        self.log_end_offset = log_end_offset
        return self._maybe_advance_high_watermark(now_ms)

    @checked
    def on_fetch(self, replica_id: int, fetch_offset: int, now_ms: float) -> list[Effect]:
        """Record a follower's fetch: its log ends at `fetch_offset`.

        The fetch of an ineligible follower outside the ISR is not recorded (see the module
        docstring). Raises NotAReplica if `replica_id` is not a follower of this leader."""
        state = self.followers.get(replica_id)
        if state is None:
            raise NotAReplica(f"broker {replica_id} is not a follower here (leader {self.leader}, "
                              f"replicas {list(self.replicas)})")
        leader_leo = self.log_end_offset
        if fetch_offset > leader_leo:
            return [FetchBeyondLogEnd(replica_id, fetch_offset, leader_leo)]
        if replica_id in self._ignored():
            return []
        if fetch_offset >= leader_leo:
            state.last_caught_up_ms = max(state.last_caught_up_ms or now_ms, now_ms)
        elif fetch_offset >= state.last_fetch_leader_leo and state.last_fetch_ms is not None:
            state.last_caught_up_ms = max(state.last_caught_up_ms or state.last_fetch_ms, state.last_fetch_ms)
        state.last_fetch_leader_leo = leader_leo
        state.last_fetch_ms = now_ms
        state.log_end_offset = fetch_offset
        effects = self._maybe_advance_high_watermark(now_ms)
        if (replica_id not in self.isr and self.pending_isr is None  # isr_candidates, for one replica
                and self.is_in_sync(replica_id)):
            effects.append(CanJoinIsr(replica_id))
        return effects

    def _ignored(self) -> frozenset[int]:
        """Followers whose fetches are not recorded: ineligible and outside the ISR."""
        return self.ineligible.difference(self.isr)

    def is_in_sync(self, replica_id: int) -> bool:
        """Kafka's `isFollowerInSync`: log end ≥ HW and ≥ the current leader epoch's start."""
        state = self.followers.get(replica_id)
        return (state is not None and state.log_end_offset >= self.high_watermark
                and self.epoch_start_offset >= 0 and state.log_end_offset >= self.epoch_start_offset)

    def isr_candidates(self) -> list[int]:
        """Eligible followers outside the ISR that may join it now (none while a change is in
        flight)."""
        if not self.is_leader or self.pending_isr is not None:
            return []
        return [r for r in self.followers if r not in self.isr and r not in self.ineligible and self.is_in_sync(r)]

    def out_of_sync(self, now_ms: float) -> list[int]:
        """ISR followers not caught up within `lag_ms` (none while a change is in flight)."""
        if not self.is_leader or self.pending_isr is not None:
            return []
        return [r for r in self.isr if r != self.local_id
                and not (r in self.followers and self.followers[r].is_caught_up(self.log_end_offset, now_ms, self.lag_ms))]

    @checked
    def isr_changes(self, now_ms: float) -> list[Effect]:
        """The periodic ISR check: shrink the lagging, expand the caught up, in one change.

        Returns AlterIsr (recorded as pending: send it to the controller) or nothing, and any
        HW move (a follower outside the ISR stops holding the HW once its lag expires)."""
        effects = self._maybe_advance_high_watermark(now_ms)
        removed, added = self.out_of_sync(now_ms), self.isr_candidates()
        if removed or added:
            new_isr = tuple(sorted((set(self.isr) - set(removed)) | set(added)))
            self.pending_isr = new_isr
            effects.append(AlterIsr(new_isr, tuple(sorted(removed)), tuple(sorted(added))))
        return effects

    @checked
    def alter_failed(self, new_isr: tuple[int, ...], now_ms: float) -> list[Effect]:
        """The controller refused the change to `new_isr`: it is no longer pending, and a
        refused addition (e.g. INELIGIBLE_REPLICA: its broker was fenced meanwhile) no longer
        holds the HW back."""
        if self.pending_isr != new_isr:
            return []
        self.pending_isr = None
        return self._maybe_advance_high_watermark(now_ms)

    def append_refusal(self, required_acks: int) -> str | None:
        """Why an acks=`required_acks` append must be refused (NOT_ENOUGH_REPLICAS), or None."""
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            return f"ISR {list(self.isr)} is smaller than min.insync.replicas {self.min_insync_replicas}"
        return None

    def replicated_refusal(self) -> str | None:
        """Why a replicated acks=all append fails (NOT_ENOUGH_REPLICAS_AFTER_APPEND), or None."""
        if len(self.maximal_isr) < self.min_insync_replicas:
            return (f"ISR shrank to {sorted(self.maximal_isr)} below min.insync.replicas "
                    f"{self.min_insync_replicas} while waiting")
        return None

    def _maybe_advance_high_watermark(self, now_ms: float) -> list[Effect]:
        if not self.is_leader:
            return []
        leader_leo = new_hw = self.log_end_offset
        maximal = self.maximal_isr
        for replica, state in self.followers.items():
            if state.log_end_offset < new_hw and (replica in maximal or (
                    replica not in self.ineligible and state.is_caught_up(leader_leo, now_ms, self.lag_ms))):
                new_hw = state.log_end_offset
        if new_hw > self.high_watermark:
            old, self.high_watermark = self.high_watermark, new_hw
            return [HighWatermarkChanged(old, new_hw)]
        return []

    # -- follower side -------------------------------------------------------------------

    @checked
    def on_leader_high_watermark(self, leader_high_watermark: int, log_end_offset: int) -> list[Effect]:
        """As follower: the leader's HW, capped at the local log end (it may go down)."""
        self.log_end_offset = log_end_offset
        return self._set_high_watermark(min(leader_high_watermark, log_end_offset))

    @checked
    def on_truncate(self, log_end_offset: int) -> list[Effect]:
        """The local log was cut (or restarted) to end at `log_end_offset`."""
        self.log_end_offset = log_end_offset
        return self._set_high_watermark(min(self.high_watermark, log_end_offset))

    def _set_high_watermark(self, new_hw: int) -> list[Effect]:
        if new_hw == self.high_watermark:
            return []
        old, self.high_watermark = self.high_watermark, new_hw
        return [HighWatermarkChanged(old, new_hw)]
