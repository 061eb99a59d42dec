import subprocess
import sys

import pytest
from click.testing import CliRunner

from raftka.cli.main import main

TREE = {
    "storage": ["random-uuid", "format"],
    "server": ["start"],
    "cluster": ["up"],
    "quorum": ["status"],
    "topics": ["create", "list", "describe", "delete", "alter"],
    "groups": ["list", "describe", "delete"],
    "log": ["dump"],
    "perf": ["produce", "consume"],
    "chaos": ["run"],
    "users": ["create", "delete", "list"],
    "transactions": ["list", "describe", "describe-producers", "abort"],
}


def test_help_lists_the_whole_tree():
    runner = CliRunner()
    top = runner.invoke(main, ["--help"])
    assert top.exit_code == 0
    for name in [*TREE, "produce", "consume"]:
        assert f"  {name} " in top.output
    for group, subs in TREE.items():
        result = runner.invoke(main, [group, "--help"])
        assert result.exit_code == 0, result.output
        for sub in subs:
            assert f"  {sub} " in result.output or f"  {sub}\n" in result.output, (group, sub)


def test_console_script_runs():
    out = subprocess.run([sys.executable, "-m", "raftka", "--version"], capture_output=True, text=True, check=True)
    assert "raftka" in out.stdout


CONSECUTIVE_VOTERS = """\
node.id=1
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095
controller.quorum.secret=a-long-enough-test-secret
log.dirs={data}
"""


@pytest.mark.parametrize("argv", [
    ["storage", "format", "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qk"],
    ["server", "start"],
    ["server", "start", "--format", "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qk"],
])
def test_rpc_port_collision_is_refused_before_anything_is_written(tmp_path, argv):
    config = tmp_path / "server.properties"
    config.write_text(CONSECUTIVE_VOTERS.format(data=tmp_path / "data"))
    out = subprocess.run([sys.executable, "-m", "raftka", *argv[:2], "--config", str(config), *argv[2:]],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "controller.rpc.port.offset" in out.stderr and "9094" in out.stderr, out.stderr
    assert not (tmp_path / "data").exists()


def test_server_start_format_needs_a_cluster_id(tmp_path):
    result = CliRunner().invoke(main, ["server", "start", "--config", __file__, "--format"])
    assert result.exit_code == 2 and "--format and --cluster-id go together" in result.output


FORMAT_CONFIG = """\
node.id=1
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:9093
controller.quorum.secret=a-long-enough-test-secret
log.dirs={data}
metadata.log.dir={meta}
"""


def test_storage_format_add_scram_writes_credentials_never_passwords(tmp_path):
    from raftka.raft_meta.metadata.bootstrap_records import BOOTSTRAP_FILE, read_bootstrap
    from raftka.raft_meta.metadata.records import decode_record

    config = tmp_path / "server.properties"
    config.write_text(FORMAT_CONFIG.format(data=tmp_path / "data", meta=tmp_path / "meta"))
    result = CliRunner().invoke(main, [
        "storage", "format", "--config", str(config), "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qk",
        "--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]",
        "-S", "SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]"])
    assert result.exit_code == 0, result.output
    assert "2 SCRAM credential(s)" in result.output
    raw = (tmp_path / "meta" / BOOTSTRAP_FILE).read_bytes()
    assert b"secret" not in raw
    assert (tmp_path / "meta" / BOOTSTRAP_FILE).stat().st_mode & 0o077 == 0
    records = [decode_record(r) for r in read_bootstrap(tmp_path / "meta")]
    assert [(r.name, r.mechanism, r.iterations) for r in records] == [("admin", 1, 4096), ("alice", 2, 8192)]


def test_storage_format_refuses_a_bad_add_scram_and_writes_nothing(tmp_path):
    config = tmp_path / "server.properties"
    config.write_text(FORMAT_CONFIG.format(data=tmp_path / "data", meta=tmp_path / "meta"))
    result = CliRunner().invoke(main, [
        "storage", "format", "--config", str(config), "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qk",
        "--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret,iterations=10]"])
    assert result.exit_code == 1 and "iterations" in result.output
    assert "admin-secret" not in result.output
    assert not (tmp_path / "meta").exists()
