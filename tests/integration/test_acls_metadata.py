"""ACLs through the real controller and quorum in this process: created and deleted as committed
records, kept in the metadata snapshot, and back after a restart that loads it."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import trio

from raftka.raft_meta.config.node_config import parse_node_config
from raftka.raft_meta.controller.controller import Controller
from raftka.raft_meta.metadata.image import SnapshotLoaded
from raftka.raft_meta.metadata.metadata_loader import MetadataLoader
from raftka.raft_meta.quorum.quorum import open_quorum_from_config
from raftka.raft_meta.security.acls import AclBinding, AclFilter
from raftka.raft_meta.security.acls import AclOperation as Op
from raftka.raft_meta.security.acls import AclPermissionType as Perm
from raftka.raft_meta.security.acls import PatternType as Pat
from raftka.raft_meta.security.acls import ResourceType as Res
from raftka.testing.local_cluster import free_low_port

pytestmark = pytest.mark.timeout(120)
CLUSTER = "AAAAAAAAAAAAAAAAAAAAAA"


@contextlib.asynccontextmanager
async def _controller_node(config):
    async with open_quorum_from_config(config) as quorum, trio.open_nursery() as nursery:
        loader = MetadataLoader(quorum, CLUSTER)
        deltas: list = []
        loader.add_publisher(lambda delta, image: deltas.append(delta))
        await nursery.start(loader.run)
        controller = Controller(config, quorum, loader)
        await nursery.start(controller.run)
        with trio.fail_after(15):
            await loader.wait_active_controller()
        yield quorum, loader, controller, deltas
        nursery.cancel_scope.cancel()


def _acl(i: int, perm: Perm = Perm.ALLOW) -> AclBinding:
    return AclBinding(Res.TOPIC, f"topic-{i}", Pat.LITERAL, f"User:u{i}", "*", Op.READ, perm)


async def test_acls_are_committed_snapshotted_and_loaded_after_a_restart(tmp_path: Path) -> None:
    port = free_low_port(set())
    config = parse_node_config({
        "node.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:{port}",
        "controller.quorum.voters": f"1@127.0.0.1:{port}",
        "controller.quorum.secret": "controller-test-secret",
        "log.dirs": str(tmp_path / "data"),
        "broker.liveness.probe.enable": "false",
        "metadata.log.max.record.bytes.between.snapshots": "2048",
    }, env={})
    async with _controller_node(config) as (quorum, loader, controller, _):
        for i in range(40):  # enough records for a few snapshots
            outcomes = await controller.create_acls([_acl(i).to_wire(), _acl(i).to_wire()])
            assert outcomes == [[None, None], [None, None]]  # the duplicate succeeds, writes nothing
        bad = await controller.create_acls([[Res.CLUSTER, "x", Pat.LITERAL, "User:a", "*", Op.ALTER, Perm.ALLOW]])
        assert bad[0][0] == "INVALID_REQUEST" and "kafka-cluster" in bad[0][1]
        [deleted] = await controller.delete_acls([AclFilter(principal="User:u0").to_wire()])
        assert deleted == {"error": None, "deleted": [_acl(0).to_wire()]}
        assert quorum.snapshot_offset > 0
        await loader.wait_for_offset(quorum.last_offset)
        before = dict(loader.image.acls)
        assert sorted(b.resource_name for b in before.values()) == sorted(f"topic-{i}" for i in range(1, 40))
        last = quorum.last_offset

    async with _controller_node(config) as (quorum, loader, controller, deltas):
        image = await loader.wait_for_offset(last)
        assert isinstance(deltas[0].record, SnapshotLoaded) and deltas[0].acls
        assert image.acls == before
        [deleted] = await controller.delete_acls([AclFilter(resource_name="topic-1").to_wire()])
        assert deleted["deleted"] == [_acl(1).to_wire()]
        assert len(loader.image.acls) == 38
