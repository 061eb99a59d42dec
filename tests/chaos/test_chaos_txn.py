"""A short transactional chaos run on 3 nodes: the txn checker finds nothing (needs the
transaction coordinator and the read_committed log on the brokers)."""

from __future__ import annotations

from raftka.chaos.run import RunConfig, run


def test_short_txn_run_under_kill_and_coordinator_kill_is_valid(tmp_path):
    config = RunConfig(out=tmp_path, nodes=3, time_limit=24, nemeses=("kill", "txn-coordinator-kill"),
                       interval=5, rate=20, partitions=2, seed=11, workload="txn")
    result = run(config)
    summary = result.check.to_json()
    assert result.drained, summary
    assert result.check.valid, summary
    stats = result.check.stats
    assert stats["transactions"].get("txn-committed", 0) > 5, stats
    assert stats["transactions"].get("txn-aborted", 0) > 0, stats
    assert stats["transactions"].get("out-committed", 0) > 0, stats
    assert stats["drained"]["out"] > 0 and stats["drained"]["in"] == stats["drained"]["out"], stats
    kinds = {f.kind for f in result.schedule}
    assert kinds == {"kill", "txn-coordinator-kill"}, result.schedule
