"""`raftka storage ...` and `raftka quorum status` as a user runs them: real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.quorum_procs import REPO, active_epoch, make_voters

pytestmark = pytest.mark.timeout(60)


def raftka(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raftka", *args], cwd=REPO, capture_output=True, text=True, timeout=30)


def _write_config(path: Path, port: int, data: Path, secret: str = "quorum-test-secret") -> Path:
    path.write_text(
        "node.id=1\n"
        "process.roles=broker,controller\n"
        f"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:{port}\n"
        "controller.listener.names=CONTROLLER\n"
        f"controller.quorum.voters=1@127.0.0.1:{port}\n"
        f"controller.quorum.secret={secret}\n"
        f"log.dirs={data}\n"
    )
    return path


def test_storage_random_uuid_and_format(tmp_path: Path) -> None:
    result = raftka("storage", "random-uuid")
    assert result.returncode == 0
    cluster_id = result.stdout.strip()
    assert len(cluster_id) == 22
    config = _write_config(tmp_path / "server.properties", 21999, tmp_path / "data")
    result = raftka("storage", "format", "--config", str(config), "--cluster-id", cluster_id)
    assert result.returncode == 0, result.stderr
    assert f"cluster.id={cluster_id}" in (tmp_path / "data" / "meta.properties").read_text()
    again = raftka("storage", "format", "--config", str(config), "--cluster-id", cluster_id)
    assert again.returncode == 1 and "already formatted" in again.stderr
    assert raftka("storage", "format", "-c", str(config), "-t", cluster_id, "--ignore-formatted").returncode == 0
    bad = tmp_path / "bad.properties"
    bad.write_text(config.read_text() + "no.such.key=1\n")
    result = raftka("storage", "format", "--config", str(bad), "--cluster-id", cluster_id)
    assert result.returncode == 1 and "unknown config key 'no.such.key'" in result.stderr


def test_quorum_status_reports_leader(tmp_path: Path) -> None:
    (voter,) = make_voters(1, tmp_path)
    port = int(voter.voters.rsplit(":", 1)[1])
    try:
        voter.start()
        voter.wait_for(lambda _: active_epoch(voter), 20, "leader")
        config = _write_config(tmp_path / "server.properties", port, tmp_path / "data")
        result = raftka("quorum", "status", "--config", str(config), "--json")
        assert result.returncode == 0, result.stderr
        (status,) = json.loads(result.stdout)
        assert status["reachable"] and status["state"] == "leader" and status["leader_id"] == 1
        text = raftka("quorum", "status", "--config", str(config))
        assert "LeaderId:       1" in text.stdout
        wrong = _write_config(tmp_path / "wrong.properties", port, tmp_path / "data", secret="not-the-quorum-secret")
        result = raftka("quorum", "status", "--config", str(wrong), "--json", "--timeout", "1")
        assert result.returncode == 1 and not json.loads(result.stdout)[0]["reachable"]
    finally:
        voter.stop()
