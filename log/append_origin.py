"""Who is appending to a partition log: Kafka's `AppendOrigin` (storage layer), instead of flags.

- CLIENT: a producer's batches through Produce, on the leader. Every record is
  validated (`log.record_validator`), control batches are refused, and the
  producer's epoch and sequence are checked (idempotence, KIP-98).
- COORDINATOR: a coordinator's own write on the leader (the group coordinator's
  offsets and TxnOffsetCommit batches). Validated like a client's, but a
  transactional producer's sequences are not checked: the coordinator, not the
  producer, numbers them (epoch and transaction state still are).
- REPLICATION: batches a follower copies from its leader, offsets and epochs
  kept. Only the framing and CRC are checked: the leader validated the records.

Kafka also has RAFT_LEADER (its metadata log); raftka's metadata log is not a
partition log.
"""

from __future__ import annotations

import enum


class AppendOrigin(enum.Enum):
    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"

    @property
    def validates_records(self) -> bool:
        """Whether every record is walked and client-only rules apply (not for replicated batches)."""
        return self is not AppendOrigin.REPLICATION

    @property
    def verifies_sequence(self) -> bool:
        """Whether a producer's sequence numbers are checked (a producer's own batches only)."""
        return self is AppendOrigin.CLIENT
