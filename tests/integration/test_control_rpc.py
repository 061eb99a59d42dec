"""The control RPC against a peer that captured its frames, and against bad arguments.

A real controller, its one-voter quorum and its control RPC server run in this process;
brokers are ControlRpcClients, some behind a recording TCP proxy that captures what they
send (what anyone on the network path can read without the secret). Every test failed
before per-connection session keys, the epoch check ahead of the session refresh, and
argument checking: replays deleted topics and re-registered brokers, a stale heartbeat
kept a session alive, and `create_topic configs=[1]` ended the controller's process.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio

from raftka.broker.net.control_rpc import ControlRpcClient, ControlRpcServer
from raftka.raft_meta.config.node_config import parse_node_config
from raftka.raft_meta.controller.controller import Controller
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.metadata.metadata_loader import MetadataLoader
from raftka.raft_meta.quorum.quorum import open_quorum_from_config
from raftka.testing.local_cluster import free_low_port
from tests.support import free_port, wait_until_async

pytestmark = pytest.mark.timeout(60)

SECRET = "control-rpc-test-secret"
CLUSTER_ID = "AAAAAAAAAAAAAAAAAAAAAA"
LISTENERS = [["PLAINTEXT", "127.0.0.1", 9092]]


@dataclass
class Harness:
    controller: Controller
    loader: MetadataLoader
    rpc: tuple[str, int]

    def client(self, address: tuple[str, int] | None = None) -> ControlRpcClient:
        return ControlRpcClient(address or self.rpc, SECRET, CLUSTER_ID)


@asynccontextmanager
async def running_controller(tmp_path: Path, **props: str):
    port = free_low_port(set())
    config = parse_node_config({
        "node.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()},CONTROLLER://127.0.0.1:{port}",
        "controller.quorum.voters": f"1@127.0.0.1:{port}",
        "controller.quorum.secret": SECRET,
        "log.dirs": str(tmp_path / "data"),
        "broker.liveness.probe.enable": "false",  # only heartbeats keep sessions here
        **props,
    }, env={})
    async with open_quorum_from_config(config) as quorum, trio.open_nursery() as nursery:
        loader = MetadataLoader(quorum, CLUSTER_ID)
        await nursery.start(loader.run)
        controller = Controller(config, quorum, loader)
        await nursery.start(controller.run)
        host, rpc_port = config.controller_rpc_bind_address()
        await nursery.start(ControlRpcServer(controller, loader, SECRET).serve, host, rpc_port)
        with trio.fail_after(15):
            await loader.wait_active_controller()
        yield Harness(controller, loader, (host, rpc_port))
        nursery.cancel_scope.cancel()


@dataclass
class _Link:
    sent: bytearray = field(default_factory=bytearray)  # client -> server, as captured
    upstream: trio.SocketStream | None = None
    closed: bool = False


class RecordingProxy:
    """Forwards TCP connections to `upstream` and records what clients send."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.links: list[_Link] = []

    async def serve(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(("127.0.0.1", listeners[0].socket.getsockname()[1]))
        await trio.serve_listeners(self._relay, listeners)

    async def _relay(self, down: trio.SocketStream) -> None:
        link = _Link()
        self.links.append(link)
        try:
            link.upstream = await trio.open_tcp_stream(*self.upstream)
            async with down, link.upstream, trio.open_nursery() as nursery:
                async def pump(source, sink, record: bytearray | None) -> None:
                    try:
                        async for chunk in source:
                            if record is not None:
                                record += chunk
                            await sink.send_all(chunk)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        pass
                    nursery.cancel_scope.cancel()

                nursery.start_soon(pump, down, link.upstream, link.sent)
                nursery.start_soon(pump, link.upstream, down, None)
        finally:
            link.closed = True


async def _replay(address: tuple[str, int], data: bytes) -> bytes:
    """Send captured bytes on a fresh connection; what came back until the server closed."""
    received = bytearray()
    stream = await trio.open_tcp_stream(*address)
    async with stream:
        await stream.send_all(data)
        with trio.move_on_after(10):
            try:
                async for chunk in stream:
                    received += chunk
            except trio.BrokenResourceError:
                pass
    return bytes(received)


async def _registered_and_unfenced(h: Harness, client: ControlRpcClient, broker_id: int) -> int:
    epoch = await client.call("register_broker", broker_id=broker_id, incarnation_id=f"inc{broker_id}",
                              listeners=LISTENERS, rack=None)
    reply = await client.call("heartbeat", broker_id=broker_id, broker_epoch=epoch, metadata_offset=h.loader.image.offset)
    assert not reply["fenced"]
    return epoch


async def test_captured_frames_replayed_on_a_new_connection_are_refused(tmp_path: Path) -> None:
    async with running_controller(tmp_path) as h, trio.open_nursery() as nursery:
        proxy = RecordingProxy(h.rpc)
        client = h.client(await nursery.start(proxy.serve))
        epoch = await _registered_and_unfenced(h, client, 2)
        await h.controller.create_topic("t", 1, 1)
        await client.call("delete_topic", name="t")
        await h.controller.create_topic("t", 1, 1)  # the same name again, a new topic
        await client.aclose()
        (captured,) = proxy.links

        await _replay(h.rpc, bytes(captured.sent))  # register, heartbeat and delete_topic again

        assert "t" in h.loader.image.topic_ids, "a replayed delete_topic deleted the new topic"
        assert h.loader.image.brokers[2].epoch == epoch, "a replayed register_broker re-registered broker 2"
        assert not h.loader.image.brokers[2].fenced
        nursery.cancel_scope.cancel()


async def test_a_frame_replayed_on_its_own_connection_is_refused(tmp_path: Path) -> None:
    async with running_controller(tmp_path) as h, trio.open_nursery() as nursery:
        proxy = RecordingProxy(h.rpc)
        client = h.client(await nursery.start(proxy.serve))
        await _registered_and_unfenced(h, client, 2)
        await h.controller.create_topic("t", 1, 1)
        (link,) = proxy.links
        before = len(link.sent)
        await client.call("delete_topic", name="t")
        delete_frame = bytes(link.sent[before:])
        await h.controller.create_topic("t", 1, 1)

        assert link.upstream is not None
        await link.upstream.send_all(delete_frame)  # injected after the client's own call
        await wait_until_async(lambda: link.closed or "t" not in h.loader.image.topic_ids, 10,
                               "the server to close the connection (or to delete the topic)")
        assert "t" in h.loader.image.topic_ids, "the replayed delete_topic deleted the new topic"
        assert link.closed
        await client.aclose()
        nursery.cancel_scope.cancel()


async def test_a_stale_epoch_heartbeat_does_not_keep_a_session(tmp_path: Path) -> None:
    session = {"broker.session.timeout.ms": "1500", "broker.heartbeat.interval.ms": "100"}
    async with running_controller(tmp_path, **session) as h:
        controller, image = h.controller, lambda: h.loader.image
        old = await controller.register_broker(2, "inc2", (("PLAINTEXT", "127.0.0.1", 9092),), None)
        await controller.heartbeat(2, old, image().offset)
        new = await controller.register_broker(2, "inc2", (("PLAINTEXT", "127.0.0.1", 9092),), None)
        assert new > old
        assert not (await controller.heartbeat(2, new, image().offset)).fenced

        # Only heartbeats of the old registration arrive now (late, or replayed): refused, and
        # the session of the current one runs out as if the broker were silent.
        with trio.fail_after(20):
            while not image().brokers[2].fenced:
                with pytest.raises(ControllerError) as refused:
                    await controller.heartbeat(2, old, image().offset)
                assert refused.value.name == "STALE_BROKER_EPOCH"
                await trio.sleep(0.05)  # a heartbeat stream, not a wait for the condition


@pytest.mark.parametrize(
    ("method", "args", "expected"),
    [
        ("create_topic", {"name": "x", "configs": [1]},
         "argument 'configs' of create_topic is a list; expected a map of string to string"),
        ("create_topic", {"name": "x", "configs": {"retention.ms": 1}}, "argument 'configs'"),
        ("create_topic", {"name": 7}, "argument 'name' of create_topic is a int; expected a string"),
        ("create_topic", {"name": "x", "num_partitions": True}, "argument 'num_partitions'"),
        ("create_topic", {"name": "x", "num_partitions": 2**70}, "argument 'num_partitions'"),
        ("create_topic", {"name": "x", "colour": "red"}, "unknown arguments ['colour'] for create_topic"),
        ("delete_topic", {}, "argument 'name' of delete_topic is missing"),
        ("heartbeat", {"broker_id": 2, "broker_epoch": "1", "metadata_offset": 0}, "argument 'broker_epoch'"),
        ("register_broker", {"broker_id": 2, "incarnation_id": "i", "listeners": [[1, 2, 3]], "rack": None},
         "argument 'listeners' of register_broker is a list; expected a list of [name, host, port]"),
        ("alter_partition", {"broker_id": 2, "broker_epoch": 1, "topic_id": "t", "partition": 0,
                             "leader_epoch": 0, "partition_epoch": 0, "new_isr": "2"}, "argument 'new_isr'"),
        ("reboot", {}, "unknown control method 'reboot'"),
    ],
)
async def test_bad_arguments_get_an_error_reply_and_the_controller_stays_up(
        tmp_path: Path, method: str, args: dict, expected: str) -> None:
    async with running_controller(tmp_path) as h:
        client = h.client()
        await _registered_and_unfenced(h, client, 2)
        with pytest.raises(ControllerError) as refused:
            await client.call(method, **args)
        assert refused.value.name == "INVALID_REQUEST"
        assert expected in refused.value.message
        # The same connection, and the controller, still work.
        topic_id = await client.call("create_topic", name="after", num_partitions=1, replication_factor=1)
        assert topic_id in h.loader.image.topics
        await client.aclose()
