"""A voter never forgets (issue #27, finding 2): real `raftka server start` processes.

A formatted node whose metadata journal was removed while it was stopped used to start again
without a word and, alone, re-create the cluster from nothing (an image without topics, every
partition directory then a stray). Now it exits 1 with one line naming the directory and what
to do, touching nothing; a journal older than what the node had acknowledged is refused too.
Normal restarts (kill -9, clean) and first starts are unchanged. The 1-node cases run Kafka's
default layout (the metadata log in the first log dir).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from raftka.client.blocking import Admin, Consumer, Producer
from raftka.client.records import TopicPartition
from raftka.raft_meta.config.node_config import load_node_config
from raftka.raft_meta.quorum.voter_guard import VoterCheckpoint
from raftka.testing.local_cluster import (
    READY_MARKER,
    LocalCluster,
    NodeExited,
    free_low_port,
    free_port_base,
)
from tests.support import wait_until

RECORDS = 200


def journal_dir(cluster: LocalCluster, node_id: int) -> Path:
    return Path(load_node_config(cluster.nodes[node_id].config_path).metadata_log_dir) / "__cluster_metadata-0"


def files_of(directory: Path) -> dict[str, int]:
    """Every file under `directory` and its size (server logs aside: a start appends to them)."""
    return {str(p.relative_to(directory)): p.stat().st_size for p in directory.rglob("*")
            if p.is_file() and p.name != "server.log"}


def produce(bootstrap: str, topic: str, count: int) -> None:
    with Producer(bootstrap, acks="all", linger_ms=2) as producer:
        futures = [producer.send(topic, str(i).encode()) for i in range(count)]
        producer.flush(30)
        for future in futures:
            future.result(timeout=30)


def read_back(bootstrap: str, topic: str, count: int) -> list[int]:
    values: list[int] = []
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])

        def all_read() -> bool:
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(int(r.value) for r in records)
            return len(values) >= count
        wait_until(all_read, timeout=30, what=f"{count} records of {topic}")
    return values


def run_refused(command: list[str], ready: str, tmp_path: Path) -> tuple[int, str]:
    """Run a start command expected to refuse: (exit status, stderr). One that starts instead
    (prints `ready`) is stopped and fails the test at once."""
    with open(tmp_path / "stderr.txt", "w+") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
        try:
            for line in process.stdout:  # EOF when it exits
                if ready in line:
                    pytest.fail(f"{command[3:5]} started on a lost or older journal")
            status = process.wait(30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            process.stdout.close()
        stderr.seek(0)
        return status, stderr.read()


def server_start(cluster: LocalCluster, node_id: int, tmp_path: Path) -> tuple[int, str]:
    """`raftka server start` as an operator runs it."""
    return run_refused([sys.executable, "-m", "raftka", "server", "start", "--config",
                        str(cluster.nodes[node_id].config_path)], READY_MARKER, tmp_path)


def refusal(stderr: str) -> str:
    """The one line a refusing `server start` prints (no traceback)."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("raftka server start:")]
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_single_voter_refuses_a_lost_or_older_journal(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, 1, log_level="INFO",
                           node_config=lambda node: {"metadata.log.dir": str(node.directory / "data")})
    node = cluster.nodes[1]
    try:
        cluster.start_and_wait()  # a freshly formatted node starts and bootstraps
        cluster.create_topic("kept", 1)
        produce(cluster.bootstrap_servers, "kept", RECORDS)
        cluster.kill(1)  # kill -9, then a normal restart
        cluster.start_node(1, wait=True)
        assert cluster.stop_node(1) == 0  # clean stop, then a normal restart
        older = tmp_path / "older-journal"
        shutil.copytree(journal_dir(cluster, 1), older)
        cluster.start_node(1, wait=True)
        cluster.create_topic("later", 1)  # metadata the older copy lacks
        assert cluster.stop_node(1) == 0
    finally:
        cluster.stop()
    journal = journal_dir(cluster, 1)
    assert journal.parent == node.directory / "data"  # the default layout
    newest = tmp_path / "newest-journal"
    shutil.move(journal, newest)

    # An older copy of the journal: behind what this voter had acknowledged.
    shutil.copytree(older, journal)
    status, stderr = server_start(cluster, 1, tmp_path)
    assert status == 1
    line = refusal(stderr)
    assert str(journal) in line and "ends at index" in line and "docs/architecture.md" in line

    # The journal files deleted: refused, through the launcher too (cluster up, LocalCluster).
    for path in journal.iterdir():
        path.unlink()
    before = files_of(node.directory)
    status, stderr = server_start(cluster, 1, tmp_path)
    assert status == 1
    line = refusal(stderr)
    assert str(journal) in line and "is missing" in line and "voter.started" in line
    with pytest.raises(NodeExited, match="is missing"):
        cluster.start_node(1, wait=True)
    assert node.process is not None and node.process.returncode == 1
    cluster.stop()
    assert files_of(node.directory) == before, "a refused start changed the node's files"

    # Putting back the files it last ran with: it starts, with every topic and record.
    journal.rmdir()
    shutil.move(newest, journal)
    try:
        cluster.start_node(1, wait=True)
        with Admin(cluster.bootstrap_servers) as admin:
            assert {"kept", "later"} <= set(admin.list_topics())
        assert read_back(cluster.bootstrap_servers, "kept", RECORDS) == list(range(RECORDS))
    finally:
        cluster.stop()


def test_a_voter_of_three_that_lost_its_journal_refuses_and_recovers_from_the_leader(tmp_path: Path) -> None:
    """The documented recovery of a journal lost for good: a copy of the leader's, taken while it
    was stopped cleanly after this node stopped (docs/architecture.md, "A voter never forgets")."""
    cluster = LocalCluster(tmp_path, 3, log_level="INFO")
    try:
        cluster.start_and_wait()
        cluster.create_topic("kept", 1, 3)
        produce(cluster.bootstrap_servers, "kept", RECORDS)
        assert cluster.stop_node(2) == 0
        shutil.rmtree(journal_dir(cluster, 2))
        with pytest.raises(NodeExited, match="is missing"):
            cluster.start_node(2, wait=True)
        assert cluster.nodes[2].process.returncode == 1
        with Admin(cluster.nodes[1].bootstrap) as admin:  # node 2 may have been the leader
            leader = wait_until(lambda: (c := admin.describe_cluster().controller_id) in (1, 3) and c,
                                timeout=30, what="a leader among the running voters")
        assert cluster.stop_node(leader) == 0
        shutil.copytree(journal_dir(cluster, leader), journal_dir(cluster, 2))
        cluster.start_node(leader)
        cluster.start_node(2)
        cluster.wait_ready(timeout=60)
        assert read_back(cluster.nodes[2].bootstrap, "kept", RECORDS) == list(range(RECORDS))
    finally:
        cluster.stop()


def test_cluster_up_surfaces_the_refusal(tmp_path: Path) -> None:
    """`raftka cluster up` on a data dir whose node lost its journal: exit 1 and the line."""
    base = free_port_base(1, offsets=(0, 1, 2, 3))  # clients, quorum, control RPC, metrics
    command = [sys.executable, "-m", "raftka", "cluster", "up", "--nodes", "1", "--data-dir", str(tmp_path),
               "--port-base", str(base)]
    up = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        for line in up.stdout:  # EOF if it exits
            if "raftka cluster ready" in line:
                break
        assert up.poll() is None, "cluster up did not start"
        up.send_signal(signal.SIGINT)
        assert up.wait(60) == 0
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        up.stdout.close()
    journal = Path(load_node_config(tmp_path / "node-1" / "server.properties").metadata_log_dir) / "__cluster_metadata-0"
    shutil.rmtree(journal)
    status, stderr = run_refused(command, "raftka cluster ready", tmp_path)
    assert status == 1
    line = refusal(stderr)
    assert str(journal) in line and "is missing" in line


async def test_a_running_voter_records_what_it_synced(tmp_path: Path) -> None:
    """In one process: the checkpoint follows the voter's commits (and the term it reached),
    never ahead of its journal, and the clean stop records the last of them."""
    from raftka.raft_meta.metadata.records import Config
    from raftka.raft_meta.quorum.pysyncobj_patches import read_journal_state
    from raftka.raft_meta.quorum.quorum import open_quorum
    from raftka.raft_meta.quorum.storage_format import (
        MetaProperties,
        random_cluster_id,
        write_meta_properties,
    )
    from raftka.raft_meta.quorum.voter_guard import read_checkpoint
    from tests.support import wait_until_async

    meta = tmp_path / "meta"
    write_meta_properties(meta, MetaProperties(random_cluster_id(), 1))
    voters = {1: f"127.0.0.1:{free_low_port(set())}"}
    async with open_quorum(1, voters, "voter-journal-test-secret", meta, storage_dirs=[meta]) as quorum:
        first = await quorum.submit(Config("cluster", "", "a", "1"))
        await wait_until_async(lambda: (read_checkpoint(meta) or VoterCheckpoint(0, 0)).commit_index >= first,
                               timeout=10, what="the checkpoint to reach the first commit")
        for value in range(20):
            last = await quorum.submit(Config("cluster", "", "a", str(value)))
        term = quorum.term
    checkpoint = read_checkpoint(meta)
    assert checkpoint == VoterCheckpoint(term, last)  # the clean stop's
    assert read_journal_state(meta / "__cluster_metadata-0").last_index >= checkpoint.commit_index


async def test_a_journal_cleared_by_a_kill_during_compaction_starts_from_its_dump(tmp_path: Path) -> None:
    """A compaction rewrites the journal in place (clear, then the entries after the dump); a
    kill between the two leaves an empty journal beside a dump that holds everything. That is
    not a lost journal: the guard reads the dump before refusing."""
    from pysyncobj.journal import FileJournal

    from raftka.raft_meta.metadata.records import Config
    from raftka.raft_meta.quorum.pysyncobj_patches import dump_last_index
    from raftka.raft_meta.quorum.quorum import QuorumSettings, open_quorum
    from raftka.raft_meta.quorum.storage_format import (
        MetaProperties,
        random_cluster_id,
        write_meta_properties,
    )
    from raftka.raft_meta.quorum.voter_guard import JournalLost, guard_start, read_checkpoint
    from tests.support import wait_until_async

    meta = tmp_path / "meta"
    journal_dir = meta / "__cluster_metadata-0"
    write_meta_properties(meta, MetaProperties(random_cluster_id(), 1))
    voters = {1: f"127.0.0.1:{free_low_port(set())}"}

    def dumped_up_to(offset: int) -> bool:
        try:
            return dump_last_index(journal_dir) >= offset
        except (OSError, EOFError):  # not written yet
            return False

    settings = QuorumSettings(snapshot_max_record_bytes=1)  # a snapshot, so a compaction, per record
    async with open_quorum(1, voters, "voter-journal-test-secret", meta, settings=settings,
                           storage_dirs=[meta]) as quorum:
        for value in range(5):
            last = await quorum.submit(Config("cluster", "", "a", str(value)))
        await wait_until_async(lambda: dumped_up_to(last), timeout=10, what="the dump to hold the last record")
    assert read_checkpoint(meta).commit_index == last
    cleared = FileJournal(str(journal_dir / "raft.journal"))
    cleared.clear()  # what the kill left: a header and no entry
    cleared._destroy()
    assert guard_start(1, journal_dir, [meta], checkpointed=True)[0]
    (journal_dir / "raft.dump").unlink()  # without the dump, the same journal is refused
    with pytest.raises(JournalLost, match="ends at index 0"):
        guard_start(1, journal_dir, [meta], checkpointed=True)
