"""The broker's logs on disk (Kafka's LogManager): where they live, the file work on them, and
the background loops that keep them.

- Directories: the log dir a new partition goes to (`dir_for`); partition directories the
  image cannot explain are set aside, never deleted (`move_strays_aside`, log/strays.py);
  a deleted log's directory is renamed `<topic>-<p>.<uuid>-delete` and removed later, by
  `run`'s delete loop (crash leftovers included).
- File work off the event loop: logs are opened (`open_logs`), closed and renamed for
  deletion (`delete_logs`), flushed after a roll, compacted and truncated in worker
  threads, each under its partition's lock (`locks`), so two file operations on one
  partition never overlap.
- The loops (`run`): retention and compaction every `log.retention.check.interval.ms`,
  the fsync of rolled segments and deferred leader-epoch checkpoints, the removal of
  `-delete` directories, and the high-watermark checkpoint (`replication-offset-checkpoint`
  in every log dir; the recovery-point and log-start checkpoints are each log's own).

The ReplicaManager owns the partitions and decides what is hosted; it hands this manager a
read-only view of them (`partitions`) and of what the image assigns (`assigned`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import structlog
import trio

from raftka.broker.replication.partition import Partition
from raftka.log.checkpoint import read_offsets, write_offsets
from raftka.log.config import LogConfig
from raftka.log.partition_log import PartitionLog
from raftka.log.partition_metadata import (
    DELETE_SUFFIX,
    log_dir_children,
    parse_renamed_dir,
    protected_dirs,
    read_topic_id,
    renamed_dir,
    write_topic_id,
)
from raftka.log.strays import move_strays_aside
from raftka.raft_meta.config.node_config import NodeConfig

log = structlog.get_logger("broker.log_manager")

Key = tuple[str, int]

HW_CHECKPOINT = "replication-offset-checkpoint"
HW_CHECKPOINT_INTERVAL_S = 5.0
RECONCILE_BATCH = 64  # logs opened / renamed / flushed per worker-thread call
RECONCILE_RETRY_S = 1.0

OpenJob = tuple[Key, str, Path, LogConfig]  # (topic, partition), topic id, log dir, config


class LogManager:
    """The hosted logs' directories, file work and background loops (see the module docstring).

    `partitions` is the ReplicaManager's own mapping of hosted partitions, read here, never
    changed; `assigned()` is what the image gives this broker, or None before the broker has
    caught up with the metadata (then nothing is known to be unassigned)."""

    def __init__(self, config: NodeConfig, partitions: Mapping[Key, Partition],
                 assigned: Callable[[], Mapping[Key, str] | None]) -> None:
        self.config = config
        self.log_dirs = [Path(d) for d in config.log_dirs]
        self.locks = PartitionLocks()
        self._partitions = partitions
        self._assigned = assigned
        self._checkpointed_hw_dirs: dict[Key, Path] = {}  # filled by _read_hw_checkpoints
        self._checkpointed_hw = self._read_hw_checkpoints()
        self._to_delete: list[Path] = []
        self._delete_wake = trio.Event()
        self._roll_flush_wanted: set[Key] = set()
        self._roll_flush_wake = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._checkpoint_loop)
            nursery.start_soon(self._log_cleanup_loop)
            nursery.start_soon(self._roll_flush_loop)
            nursery.start_soon(self._delete_loop)
            task_status.started()

    # -- directories ---------------------------------------------------------------------

    def dir_for(self, key: Key) -> Path:
        """The log dir holding this partition: where it already is, else the least loaded."""
        if len(self.log_dirs) == 1:
            return self.log_dirs[0]
        name = f"{key[0]}-{key[1]}"
        for d in self.log_dirs:
            if (d / name).is_dir():
                return d
        # Least loaded by the partitions hosted now (globbing every dir per new partition
        # made creating a big topic quadratic).
        hosted = {d: 0 for d in self.log_dirs}
        for partition in self._partitions.values():
            parent = partition.log.dir.parent
            if parent in hosted:
                hosted[parent] += 1
        return min(self.log_dirs, key=lambda d: hosted[d])

    async def move_strays_aside(self, expected: Mapping[Key, str]) -> None:
        """Rename aside (`-stray`, kept for an operator) every partition directory that is not
        in `expected` ((topic, partition) -> topic id) or holds another topic id; in a worker
        thread. The log dirs, the metadata dir and its `__cluster_metadata-0` are never strays."""
        protected = protected_dirs(self.log_dirs, self.config.metadata_log_dir)
        await trio.to_thread.run_sync(move_strays_aside, self.log_dirs, expected, protected,
                                      int(time.time() * 1000))

    # -- opening and deleting logs ----------------------------------------------------------

    async def open_logs(self, jobs: list[OpenJob]) -> list[PartitionLog | _OpenFailed | None]:
        """Open (or create) the logs of `jobs` in one worker-thread call under their locks: for
        each, the log, None if its directory holds another topic id (logged), or OPEN_FAILED
        (logged; open it again later)."""
        async with self.locks.hold([key for key, *_ in jobs]):
            return await trio.to_thread.run_sync(_open_logs, jobs)

    async def delete_logs(self, logs: list[PartitionLog]) -> None:
        """Close each log and rename its directory `<topic>-<p>.<uuid>-delete` (a re-created
        topic never meets the old files), in worker threads under the partitions' locks; the
        renamed directories are removed later by the delete loop, as Kafka does."""
        for i in range(0, len(logs), RECONCILE_BATCH):
            chunk = logs[i:i + RECONCILE_BATCH]
            async with self.locks.hold([(plog.topic, plog.partition) for plog in chunk]):
                renamed = await trio.to_thread.run_sync(_close_and_rename, chunk)
            self._to_delete.extend(renamed)
            self._delete_wake.set()

    async def _delete_loop(self) -> None:
        """Remove the `-delete` directories (leftovers of a crash included), in worker threads."""
        protected = protected_dirs(self.log_dirs, self.config.metadata_log_dir)
        self._to_delete.extend(await trio.to_thread.run_sync(_renamed_for_delete, self.log_dirs, protected))
        while True:
            if not self._to_delete:
                await self._delete_wake.wait()
                self._delete_wake = trio.Event()
                continue
            dirs, self._to_delete = self._to_delete[:RECONCILE_BATCH], self._to_delete[RECONCILE_BATCH:]
            await trio.to_thread.run_sync(_remove_dirs, dirs)

    # -- file work for open partitions (worker threads, per-partition lock) ------------------

    def request_flush(self, key: Key) -> None:
        """`PartitionLog.on_roll` and `LeaderEpochCache.on_deferred`: the rolled segment and the
        leader-epoch checkpoint (written on every role change) are fsynced by the roll-flush loop."""
        try:
            trio.lowlevel.current_task()
        except RuntimeError:  # from a worker thread (a truncation): hop to the event loop
            trio.from_thread.run_sync(self.request_flush, key)
            return
        self._roll_flush_wanted.add(key)
        self._roll_flush_wake.set()

    async def _roll_flush_loop(self) -> None:
        while True:
            await self._roll_flush_wake.wait()
            self._roll_flush_wake = trio.Event()
            keys, self._roll_flush_wanted = sorted(self._roll_flush_wanted), set()
            partitions = [p for key in keys if (p := self._partitions.get(key)) is not None]
            again = await self._for_each_in_threads(partitions, _flush_rolled, "log.roll_flush_failed")
            if again:  # e.g. EMFILE: the recovery point waits; flush them after a pause
                await trio.sleep(RECONCILE_RETRY_S)
                for partition in again:
                    self.request_flush(partition.key)

    async def _log_cleanup_loop(self) -> None:
        """Retention (and compaction, for compacted topics) every `log.retention.check.interval.ms`.

        Leaders and followers clean their own logs, as in Kafka. Retention only renames
        segments (`.deleted`, removed after `file.delete.delay.ms`) and stays on the event
        loop; compaction reads, rewrites and fsyncs segments, so it runs in worker threads
        under each partition's lock (appends and reads carry on meanwhile: it never touches
        the active segment, and swaps a cleaned segment in with one list store).
        """
        interval = self.config.log_retention_check_interval_ms / 1000.0
        while True:
            await trio.sleep(interval)
            self.clean_logs(compact=False)
            if self.config.log_cleaner_enable:
                compacted = [p for p in self._partitions.values() if p.log.config.compact]
                await self._for_each_in_threads(compacted, _compact, "log.cleanup_failed")

    def clean_logs(self, now_ms: int | None = None, *, compact: bool = True) -> None:
        """Retention on every hosted log, and (with `compact`, here on the calling thread)
        compaction of the compacted ones; a failure is logged and the next log goes on."""
        for partition in list(self._partitions.values()):
            plog = partition.log
            try:
                if plog.config.delete:
                    deleted = plog.delete_old_segments(now_ms)
                    if deleted:
                        log.info("log.retention_deleted", topic=partition.topic, partition=partition.index,
                                 segments=deleted, log_start_offset=plog.log_start_offset)
                if compact and plog.config.compact and self.config.log_cleaner_enable:
                    plog.compact(now_ms)
            except Exception:
                log.exception("log.cleanup_failed", topic=partition.topic, partition=partition.index)

    async def _for_each_in_threads(self, partitions: list[Partition], fn: Callable[[Partition], object],
                                   failure_event: str) -> list[Partition]:
        """`fn` on each partition still hosted, in worker threads; returns those to try again
        (see `_each`)."""
        again: list[Partition] = []
        for i in range(0, len(partitions), RECONCILE_BATCH):
            chunk = partitions[i:i + RECONCILE_BATCH]
            async with self.locks.hold([p.key for p in chunk]):
                live = [p for p in chunk if self._partitions.get(p.key) is p]
                again += await trio.to_thread.run_sync(_each, live, fn, failure_event)
        return again

    # -- the high-watermark checkpoint -------------------------------------------------------

    def take_checkpointed_high_watermark(self, key: Key) -> int:
        """The high watermark the checkpoint gave `key` (0 if none), for the partition being
        installed: from now on the partition's own value is the one checkpointed."""
        self._checkpointed_hw_dirs.pop(key, None)
        return self._checkpointed_hw.pop(key, 0)

    async def _checkpoint_loop(self) -> None:
        while True:
            await trio.sleep(HW_CHECKPOINT_INTERVAL_S)
            # Collected on the trio thread (partitions change there), written (fsync) off it.
            try:
                await trio.to_thread.run_sync(self._write_hw_checkpoints, self._collect_high_watermarks())
            except OSError as exc:  # e.g. EMFILE: the next round retries; never end the broker
                log.warning("hw_checkpoint.write_failed", error=str(exc),
                            retry_in_s=HW_CHECKPOINT_INTERVAL_S)

    def _read_hw_checkpoints(self) -> dict[Key, int]:
        out: dict[Key, int] = {}
        for d in self.log_dirs:
            path = d / HW_CHECKPOINT
            if path.exists():
                try:
                    offsets = read_offsets(path) or {}
                except (OSError, ValueError) as exc:
                    log.warning("hw_checkpoint.unreadable", path=str(path), error=str(exc))
                    continue
                out.update(offsets)
                self._checkpointed_hw_dirs.update(dict.fromkeys(offsets, d))
        return out

    def _collect_high_watermarks(self) -> dict[Path, dict[Key, int]]:
        by_dir: dict[Path, dict[Key, int]] = {d: {} for d in self.log_dirs}
        for key, partition in self._partitions.items():
            by_dir.setdefault(partition.log.dir.parent, {})[key] = partition.high_watermark
        # A partition not open yet (before catch-up, or its open still queued) keeps what the
        # last checkpoint said: rewriting the file without it would restart it at high
        # watermark 0 after a crash in between. Dropped once the image no longer assigns it.
        assigned = self._assigned()
        for key, d in self._checkpointed_hw_dirs.items():
            if key not in self._partitions and (assigned is None or key in assigned):
                by_dir.setdefault(d, {}).setdefault(key, self._checkpointed_hw[key])
        return by_dir

    @staticmethod
    def _write_hw_checkpoints(by_dir: dict[Path, dict[Key, int]]) -> None:
        for d, offsets in by_dir.items():
            if d.is_dir():
                write_offsets(d / HW_CHECKPOINT, offsets)

    def checkpoint_high_watermarks(self) -> None:
        self._write_hw_checkpoints(self._collect_high_watermarks())

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Write the high-watermark checkpoint, then close every hosted log (flushed); failures
        are logged and the next log goes on."""
        try:
            self.checkpoint_high_watermarks()
        except OSError as exc:
            log.warning("hw_checkpoint.failed", error=str(exc))
        for partition in self._partitions.values():
            try:
                partition.log.close()
            except Exception:
                log.exception("partition.close_failed", topic=partition.topic, partition=partition.index)


# -- worker-thread functions (no trio, no shared state but what they are handed) ------------


class _OpenFailed:
    """`_open_logs`' answer for a log that could not be opened (logged); it is retried."""


OPEN_FAILED = _OpenFailed()
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOSPC})


def _open_logs(jobs: list[OpenJob]) -> list[PartitionLog | _OpenFailed | None]:
    out: list[PartitionLog | _OpenFailed | None] = []
    for (topic, index), topic_id, directory, config in jobs:
        plog = None
        try:
            plog = PartitionLog.open(directory, topic, index, config)
            recorded = read_topic_id(plog.dir)
            if recorded is None:
                write_topic_id(plog.dir, topic_id)
            elif recorded != topic_id:  # stray dirs are set aside at catch-up; this is a bug if seen
                log.error("partition.topic_id_mismatch", topic=topic, partition=index,
                          dir=str(plog.dir), recorded=recorded, expected=topic_id)
                plog.close()
                plog = None
        except Exception as exc:
            if isinstance(exc, OSError) and exc.errno in _RESOURCE_ERRNOS:
                # Out of descriptors or memory for now: the file loop opens it again shortly.
                log.warning("partition.open_failed", topic=topic, partition=index, error=str(exc),
                            retry_in_s=RECONCILE_RETRY_S)
            else:
                log.exception("partition.open_failed", topic=topic, partition=index)
            if plog is not None:
                with contextlib.suppress(Exception):
                    plog.close()
            plog = OPEN_FAILED
        out.append(plog)
    return out


def _close_and_rename(logs: list[PartitionLog]) -> list[Path]:
    renamed = []
    for plog in logs:
        try:
            plog.close_for_delete()  # no fsync of data about to be deleted
        except Exception:
            log.exception("partition.close_failed", topic=plog.topic, partition=plog.partition)
        target = renamed_dir(plog.dir, DELETE_SUFFIX)
        try:
            os.rename(plog.dir, target)
        except FileNotFoundError:
            continue
        except OSError as exc:
            # Kept: removing it under its live name could remove a re-created topic's new log
            # opened meanwhile in the same place (the open then refuses the old topic id).
            log.error("partition.rename_failed", dir=str(plog.dir), error=str(exc), action="kept")
            continue
        renamed.append(target)
    return renamed


def _renamed_for_delete(log_dirs: list[Path], protected: frozenset[Path]) -> list[Path]:
    """The directories a deletion renamed (`<topic>-<p>.<32 hex>-delete`, Kafka's exact form)
    and a crash left behind. Nothing else is taken for one: not a `-stray` directory, not
    any other name ending in `-delete`, not a log dir or the metadata dir (`protected`)."""
    return [d for d in log_dir_children(log_dirs, protected)
            if (renamed := parse_renamed_dir(d.name)) is not None and renamed[2] == DELETE_SUFFIX]


def _remove_dirs(dirs: list[Path]) -> None:
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
        log.info("log.dir_deleted", dir=str(d))


def _flush_rolled(partition: Partition) -> None:
    partition.log.flush_rolled()


def _compact(partition: Partition) -> None:
    partition.log.compact()


def _each(partitions: list[Partition], fn: Callable[[Partition], object], failure_event: str) -> list[Partition]:
    """`fn` on each partition; the ones that failed for want of descriptors or memory (logged as
    a warning, to be tried again); any other failure is logged as an error."""
    again = []
    for partition in partitions:
        try:
            fn(partition)
        except OSError as exc:
            if exc.errno not in _RESOURCE_ERRNOS:
                log.exception(failure_event, topic=partition.topic, partition=partition.index)
                continue
            log.warning(failure_event, topic=partition.topic, partition=partition.index, error=str(exc),
                        retry_in_s=RECONCILE_RETRY_S)
            again.append(partition)
        except Exception:
            log.exception(failure_event, topic=partition.topic, partition=partition.index)
    return again


class PartitionLocks:
    """One trio lock per partition name: two file operations on a partition never overlap.
    Several are taken in sorted order (no deadlock between batch holders); an unheld lock is dropped."""

    def __init__(self) -> None:
        self._locks: dict[Key, tuple[trio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, keys: list[Key]) -> AsyncIterator[None]:
        ordered = sorted(set(keys))
        for key in ordered:
            lock, users = self._locks.get(key) or (trio.Lock(), 0)
            self._locks[key] = (lock, users + 1)
        acquired: list[trio.Lock] = []
        try:
            for key in ordered:
                lock = self._locks[key][0]
                await lock.acquire()
                acquired.append(lock)
            yield
        finally:
            for lock in acquired:
                lock.release()
            for key in ordered:
                lock, users = self._locks[key]
                if users <= 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)
