"""KIP-890 part 1: a partition leader checks a transactional write with the coordinator.

Before appending a producer's first transactional batch to a partition where
it has no open transaction, the leader asks the transaction coordinator
(AddPartitionsToTxn v4, `verify_only`, over the inter-broker listener, as the
marker sender connects) whether the partition was added to that producer's
transaction. So a batch that arrives late, after its transaction's ABORT
marker, cannot open a transaction nobody will close (a "hanging transaction",
which would hold the LSO back and stall compaction for good).

Answers (docs/transactions.md, "KIP-890 part 1"), as the Produce error per partition:
- added: 0, and the append goes ahead;
- not added: 48 INVALID_TXN_STATE;
- the producer's epoch no longer matches (47/90): 47;
- the coordinator loading, moving, busy (14/15/16/51), missing, or a network
  error: 19 NOT_ENOUGH_REPLICAS, which every client retries.

Which question is asked, and how its answer is told, depends on the request's version
(`TxnOperation`, Kafka's TransactionSupportedOperation):
- DEFAULT_ERROR (Produce <= v10, TxnOffsetCommit <= v3): as above.
- GENERIC_ERROR (Produce v11, TxnOffsetCommit v4): not added is 120 TRANSACTION_ABORTABLE.
- ADD_PARTITION (Produce v12, TxnOffsetCommit v5, transaction version 2): the leader
  adds the partition to the transaction itself (AddPartitionsToTxn v5, `verify_only`
  false), whatever `transaction.partition.verification.enable` says, as Kafka 4 does.
  CONCURRENT_TRANSACTIONS (the previous transaction's markers are still being written) is
  retried here for up to 100 ms, 20 ms apart (Kafka's add.partitions.to.txn.retry.backoff.*),
  then answered as itself; the client retries it.

Kafka's cache per producer: once verified and appended, the producer has an open
transaction in the partition at that epoch, and later batches of it skip the check until
its marker ends it (a batch at a newer epoch, the next transaction of transaction
version 2, is asked about again). A `guard` (Kafka's VerificationGuard) taken before asking makes a
marker that lands while the question is in flight void the answer (48).
`transaction.partition.verification.enable=false` turns the check off.
"""

from __future__ import annotations

import enum

import structlog
import trio

from raftka.broker.net.peer_connections import PeerConnections
from raftka.broker.txn.txn_records import partition_for_txn
from raftka.client.protocol import ApiKey, ErrorCode

log = structlog.get_logger("broker.txn_verification")

TRANSACTION_STATE_TOPIC = "__transaction_state"
VERIFY_VERSION = 4
ADD_VERSION = 5  # AddPartitionsToTxn v5: the coordinator records a transaction version 2 add
REQUEST_TIMEOUT_S = 10.0
ADD_RETRY_BACKOFF_S = 0.02  # Kafka's add.partitions.to.txn.retry.backoff.ms
ADD_RETRY_MAX_S = 0.1  # Kafka's add.partitions.to.txn.retry.backoff.max.ms


class TxnOperation(enum.IntEnum):
    """Kafka's TransactionSupportedOperation, chosen by the request's version."""

    DEFAULT_ERROR = 0
    GENERIC_ERROR = 1  # may answer TRANSACTION_ABORTABLE
    ADD_PARTITION = 2  # transaction version 2: add the partition, not only verify


def produce_operation(version: int) -> TxnOperation:
    """Produce v11 may answer TRANSACTION_ABORTABLE; v12 is transaction version 2."""
    return (TxnOperation.ADD_PARTITION if version >= 12 else
            TxnOperation.GENERIC_ERROR if version >= 11 else TxnOperation.DEFAULT_ERROR)


def txn_offset_commit_operation(version: int) -> TxnOperation:
    """TxnOffsetCommit v4 may answer TRANSACTION_ABORTABLE; v5 is transaction version 2."""
    return (TxnOperation.ADD_PARTITION if version >= 5 else
            TxnOperation.GENERIC_ERROR if version >= 4 else TxnOperation.DEFAULT_ERROR)

_RETRIABLE = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS})
_EPOCH = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED})


def produce_error(coordinator_code: int, operation: TxnOperation = TxnOperation.DEFAULT_ERROR) -> int:
    """The Produce error for the coordinator's answer (AddPartitionsToTxn v4/v5)."""
    if coordinator_code == 0:
        return 0
    if coordinator_code == ErrorCode.CONCURRENT_TRANSACTIONS and operation is TxnOperation.ADD_PARTITION:
        return coordinator_code  # transaction version 2: told as itself (Kafka's ReplicaManager)
    if coordinator_code in _RETRIABLE:
        return int(ErrorCode.NOT_ENOUGH_REPLICAS)
    if coordinator_code in _EPOCH:
        return int(ErrorCode.INVALID_PRODUCER_EPOCH)
    if coordinator_code == ErrorCode.TRANSACTION_ABORTABLE and operation is not TxnOperation.DEFAULT_ERROR:
        return coordinator_code
    return int(ErrorCode.INVALID_TXN_STATE)


class TxnVerifier:
    """Asks the coordinators; owns one connection per coordinator broker."""

    def __init__(self, replicas) -> None:
        self.replicas = replicas
        self._peers = PeerConnections(replicas, f"raftka-txn-verification-{replicas.node_id}", REQUEST_TIMEOUT_S)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self._peers.run(task_status=task_status)

    def _coordinator(self, transactional_id: str) -> int | None:
        image = self.replicas.image
        topic = image.topic_by_name(TRANSACTION_STATE_TOPIC)
        if topic is None or not topic.partitions:
            return None
        part = topic.partitions.get(partition_for_txn(transactional_id, len(topic.partitions)))
        if part is None or part.leader < 0 or not image.is_live(part.leader):
            return None
        return part.leader

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     topic: str, partition: int, operation: TxnOperation = TxnOperation.DEFAULT_ERROR) -> int:
        """The Produce error for this transactional write (0: the partition was added; with
        ADD_PARTITION, added now): one question to the coordinator."""
        coordinator = self._coordinator(transactional_id)
        if coordinator is None:
            return int(ErrorCode.NOT_ENOUGH_REPLICAS)
        add = operation is TxnOperation.ADD_PARTITION
        body = {"transactions": [{"transactional_id": transactional_id, "producer_id": producer_id,
                                  "producer_epoch": producer_epoch, "verify_only": not add,
                                  "topics": [{"name": topic, "partitions": [partition]}]}]}
        try:
            conn = await self._peers.get(coordinator)
            if conn is None:
                return int(ErrorCode.NOT_ENOUGH_REPLICAS)
            response = await conn.request(ApiKey.ADD_PARTITIONS_TO_TXN, body,
                                          version=ADD_VERSION if add else VERIFY_VERSION)
        except Exception as exc:  # connection refused or lost, timeout, a malformed answer
            log.info("txn_verification.failed", coordinator=coordinator, transactional_id=transactional_id,
                     topic=topic, partition=partition, error=str(exc))
            await self._peers.drop(coordinator)
            return int(ErrorCode.NOT_ENOUGH_REPLICAS)
        code = response.error_code
        for txn in response.results_by_transaction:
            for result in txn.topic_results:
                for part in result.results_by_partition:
                    if result.name == topic and part.partition_index == partition:
                        code = code or part.partition_error_code
        error = produce_error(code, operation)
        if error:
            # An add behind the previous transaction's markers is routine (retried): debug only.
            emit = log.debug if add and error == ErrorCode.CONCURRENT_TRANSACTIONS else log.info
            emit("txn_verification.refused", transactional_id=transactional_id, producer_id=producer_id,
                 producer_epoch=producer_epoch, topic=topic, partition=partition, coordinator_error=code,
                 error_code=error)
        return error


def enabled_verifier(ctx, operation: TxnOperation = TxnOperation.DEFAULT_ERROR) -> TxnVerifier | None:
    """The broker's verifier, or None when `transaction.partition.verification.enable=false`
    (transaction version 2's adds happen anyway) or in a context without one (a test's)."""
    verifier = getattr(ctx, "txn_verifier", None)
    if verifier is None:
        return None
    if operation is not TxnOperation.ADD_PARTITION and not ctx.config.transaction_partition_verification_enable:
        return None
    return verifier


async def verify_partition(verifier: TxnVerifier | None, partition, transactional_id: str, producer_id: int,
                           producer_epoch: int, operation: TxnOperation = TxnOperation.DEFAULT_ERROR) -> int:
    """KIP-890 for a transactional write to `partition` (a leader's Partition): 0 to append,
    else the Produce error. Only a producer without an open transaction there at this epoch is
    asked about; a marker that lands while the question is in flight voids a yes
    (INVALID_TXN_STATE)."""
    if verifier is None or partition.in_transaction(producer_id, producer_epoch):
        return 0
    deadline = trio.current_time() + ADD_RETRY_MAX_S
    while True:
        # A guard per question: the previous transaction's marker may land while an add waits
        # for it (CONCURRENT_TRANSACTIONS), which voids only the answers asked before it.
        guard = partition.verification_guard(producer_id, producer_epoch,
                                             supports_epoch_bump=operation is TxnOperation.ADD_PARTITION)
        code = await verifier.verify(transactional_id, producer_id, producer_epoch, partition.topic, partition.index,
                                     operation)
        if (code != ErrorCode.CONCURRENT_TRANSACTIONS or operation is not TxnOperation.ADD_PARTITION
                or trio.current_time() + ADD_RETRY_BACKOFF_S > deadline):
            break
        await trio.sleep(ADD_RETRY_BACKOFF_S)  # Kafka's backoff before asking again
    if code == 0 and not partition.in_transaction(producer_id, producer_epoch) and not partition.guard_holds(
            producer_id, guard):
        # A marker landed meanwhile (and no batch of a concurrent request opened the
        # transaction here, Kafka's hasOngoingTransaction): that answer is void.
        code = int(ErrorCode.INVALID_TXN_STATE)
    return code
