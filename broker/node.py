"""One raftka node: metadata quorum voter + controller + broker, under one nursery.

A broker-only node (`process.roles=broker`) is the same minus the controller: its quorum is
an observer that follows the committed metadata log (raft_meta/quorum/quorum.py), and it reaches the
active controller over the control RPC like any broker that is not the controller.

Start-up order: verify the storage format (cluster id), start the quorum
voter, follow the metadata log, open the listeners (their ports are part of the
registration), register with the active controller, take partition roles once
the local image includes that registration (never from what was replayed from
the local journal alone: it may be stale), then wait to be unfenced and serve.
Shutdown (SIGTERM/Ctrl-C): controlled shutdown first — the controller moves
this broker's leaderships away — then the listeners stop, every partition
log is flushed and checkpointed, and the voter stops.
"""

from __future__ import annotations

import resource
import uuid
from dataclasses import dataclass

import structlog
import trio

from raftka.broker.acl_checks import anonymous_inter_broker_warning
from raftka.broker.client_quotas import ClientQuotas
from raftka.broker.context import BrokerContext
from raftka.broker.group.group_coordinator import GroupCoordinator
from raftka.broker.group.share_coordinator import ShareCoordinator
from raftka.broker.group.share_dlq import DlqWriter
from raftka.broker.group.share_partition_manager import SharePartitionManager
from raftka.broker.group.share_state_persister import ShareStatePersister
from raftka.broker.kafka_apis import KafkaApis
from raftka.broker.metrics_http import MetricsServer
from raftka.broker.net.control_rpc import ControlRpcServer
from raftka.broker.net.controller_channel import ControllerChannel
from raftka.broker.net.network import ListenerLimits, serve_listener
from raftka.broker.net.sasl_state import scram_lookup_from_image
from raftka.broker.net.tls import ListenerTransport
from raftka.broker.replication.replica_manager import ReplicaManager
from raftka.broker.txn.producer_ids import ProducerIdManager
from raftka.broker.txn.txn_coordinator import TxnCoordinator
from raftka.broker.txn.txn_verification import TxnVerifier
from raftka.raft_meta.config.node_config import NodeConfig
from raftka.raft_meta.controller.controller import Controller
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.controller.quota_decisions import ip_connection_rate
from raftka.raft_meta.metadata.bootstrap_records import cluster_default_records, read_bootstrap
from raftka.raft_meta.metadata.metadata_loader import MetadataLoader
from raftka.raft_meta.quorum.quorum import open_quorum_from_config
from raftka.raft_meta.quorum.storage_format import verify_storage
from raftka.raft_meta.security.authorizer import build_authorizer

log = structlog.get_logger("broker.node")

CONTROLLED_SHUTDOWN_TIMEOUT_S = 10.0
REGISTER_RETRY_S = 0.2
CONTROLLER_UNREACHABLE_S = 2.0


@dataclass(frozen=True)
class BoundListener:
    name: str
    host: str
    port: int


def client_endpoints(config: NodeConfig):
    """The Kafka-protocol listeners (every listener that is not a controller listener)."""
    return [e for e in config.listeners if e.name not in config.controller_listener_names]


def advertised_endpoints(config: NodeConfig, bound: list[BoundListener]) -> tuple[tuple[str, str, int], ...]:
    """What clients are told: advertised.listeners, else the bound listeners (port 0 resolved)."""
    by_name = {b.name: b for b in bound}
    out = []
    advertised = {e.name: e for e in config.advertised_listeners}
    for name, b in by_name.items():
        e = advertised.get(name)
        if e is not None and e.port != 0:
            out.append((name, e.host or b.host, e.port))
        else:
            out.append((name, b.host or "127.0.0.1", b.port))
    return tuple(out)


# Descriptors a node needs besides one per segment of each hosted partition: listeners, the
# quorum's and the control RPC's sockets, worker threads' files, logs.
BASE_DESCRIPTORS = 256


def raise_descriptor_limit() -> tuple[int, int]:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (the JVM does the same for
    Kafka); returns (soft, hard) after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft, hard


def check_descriptor_limit(partitions: int, max_connections: int | None) -> None:
    """Warn when RLIMIT_NOFILE cannot cover the hosted partitions: each holds one descriptor per
    segment (at least one), and each client connection one more."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    connections = max_connections if max_connections is not None and max_connections < 1 << 20 else 1000
    needed = BASE_DESCRIPTORS + partitions + connections
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning("node.descriptor_limit_low", limit=soft, partitions=partitions, needed_at_least=needed,
                    hint="raise the open-files limit (ulimit -n, LimitNOFILE=) to at least this; "
                         "each segment of a partition holds one descriptor")


class BrokerNode:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.shutdown_requested = trio.Event()
        self.bound: list[BoundListener] = []
        self.ctx: BrokerContext | None = None
        self.metrics_port: int | None = None

    def request_shutdown(self) -> None:
        self.shutdown_requested.set()

    async def run(self, *, task_status: trio.TaskStatus[BrokerNode] = trio.TASK_STATUS_IGNORED) -> None:
        config = self.config
        cluster_id = verify_storage(config)
        log.info("node.starting", node_id=config.node_id, cluster_id=cluster_id)
        acl_warning = anonymous_inter_broker_warning(config)
        if acl_warning is not None:
            log.warning("acl.inter_broker_anonymous", reason=acl_warning)
        replicas = ReplicaManager(config)
        groups = GroupCoordinator(config, replicas, self._create_offsets_topic)
        replicas.add_leadership_listener(groups.on_leadership)
        txns = TxnCoordinator(config, replicas, self._create_transaction_state_topic, self._next_producer_id)
        replicas.add_leadership_listener(txns.on_leadership)
        share_coordinator = ShareCoordinator(config, replicas, self._create_share_state_topic)
        replicas.add_leadership_listener(share_coordinator.on_leadership)
        share_persister = ShareStatePersister.for_broker(share_coordinator, replicas)
        try:
            async with open_quorum_from_config(config) as quorum:
                loader = MetadataLoader(quorum, cluster_id,
                                        bootstrap=(*read_bootstrap(config.metadata_log_dir),
                                                   *cluster_default_records(config.min_insync_replicas)))
                loader.add_publisher(replicas.publish)
                loader.add_publisher(share_coordinator.publish)
                controller = Controller(config, quorum, loader)
                channel = ControllerChannel(config, controller, loader)
                rpc = ControlRpcServer(controller, loader, config.controller_quorum_secret or "")
                ctx = BrokerContext(config, cluster_id, loader, replicas, channel,
                                    ProducerIdManager(self._allocate_producer_ids), groups=groups,
                                    authorizer=build_authorizer(config.authorizer_class_name, config.super_users,
                                                                config.allow_everyone_if_no_acl_found),
                                    txns=txns, txn_verifier=TxnVerifier(replicas),
                                    client_quotas=ClientQuotas.from_config(config),
                                    share_coordinator=share_coordinator, share_persister=share_persister)
                ctx.shares = SharePartitionManager(config, replicas, lambda: ctx.share_persister)
                ctx.shares.dlq = DlqWriter(replicas, channel, config.node_id, config.raw)
                replicas.add_leadership_listener(ctx.shares.on_leadership)
                groups.share.listeners.append(ctx.shares)  # members gone release their records
                self.ctx = ctx
                async with trio.open_nursery() as nursery:
                    await nursery.start(groups.run)
                    await nursery.start(txns.run)
                    await nursery.start(share_coordinator.run)
                    await nursery.start(share_persister.run)
                    await nursery.start(ctx.txn_verifier.run)
                    await nursery.start(ctx.shares.run)
                    await nursery.start(ctx.shares.dlq.run)
                    await nursery.start(loader.run)
                    if config.is_controller:
                        # A broker-only node (an observer of the quorum) is never the controller.
                        await nursery.start(controller.run)
                        rpc_host, rpc_port = config.controller_rpc_bind_address()
                        await nursery.start(rpc.serve, rpc_host, rpc_port)
                    await nursery.start(replicas.run, self._alter_partition)
                    apis = KafkaApis(ctx)
                    endpoints = client_endpoints(config)
                    limits = ListenerLimits.from_config(config, [e.name for e in endpoints],
                                                        config.inter_broker_listener_name)
                    limits.quotas.ip_rate = lambda ip: ip_connection_rate(loader.image.client_quotas, ip)
                    limits.quotas.rate_samples = config.quota_window_num
                    limits.quotas.rate_window_s = float(config.quota_window_size_seconds)
                    scram_lookup = scram_lookup_from_image(lambda: loader.image)
                    for endpoint in endpoints:
                        security = config.security.listener(endpoint.name)
                        transport = (ListenerTransport(security, scram_lookup)
                                     if security.protocol != "PLAINTEXT" else None)
                        if transport is not None and transport.ssl_context is not None:
                            nursery.start_soon(transport.watch)  # certificates reload without a restart
                        sockets = await nursery.start(
                            lambda task_status, e=endpoint, t=transport: serve_listener(
                                e.host, e.port, apis.handle, listener=e.name, limits=limits,
                                transport=t, task_status=task_status,
                            )
                        )
                        port = sockets[0].socket.getsockname()[1]
                        self.bound.append(BoundListener(endpoint.name, endpoint.host, port))
                    if config.metrics_port >= 0:
                        host = config.metrics_host if config.metrics_host is not None else endpoints[0].host
                        self.metrics_port = await nursery.start(
                            MetricsServer(ctx, limits).serve, host, config.metrics_port)
                    with trio.CancelScope() as startup:
                        # A shutdown asked for while starting (SIGTERM, the launcher gone) ends
                        # start-up at once: there is nothing to hand over yet.
                        nursery.start_soon(self._cancel_on_shutdown, startup)
                        await self._register(ctx)
                        # Partition roles come only from metadata that includes our registration.
                        await loader.wait_for_offset(ctx.broker_epoch)
                        await replicas.catch_up()
                        check_descriptor_limit(len(replicas.assigned_partitions()),
                                               getattr(config, "max_connections", None))
                        nursery.start_soon(self._heartbeat_loop, ctx)
                        # The hosted logs open in worker threads (heartbeats go on meanwhile).
                        await replicas.wait_reconciled()
                        await self._wait_unfenced(ctx)
                    if self.shutdown_requested.is_set():
                        log.info("node.start_abandoned", node_id=config.node_id)
                        await channel.aclose()
                        nursery.cancel_scope.cancel()
                        return
                    ctx.serving = True
                    log.info("node.started", node_id=config.node_id,
                             listeners=[f"{b.name}://{b.host}:{b.port}" for b in self.bound],
                             broker_epoch=ctx.broker_epoch)
                    task_status.started(self)
                    await self.shutdown_requested.wait()
                    log.info("node.stopping", node_id=config.node_id)
                    await self._controlled_shutdown(ctx)
                    await channel.aclose()
                    nursery.cancel_scope.cancel()
        finally:
            replicas.close()
            log.info("node.stopped", node_id=config.node_id)

    async def _cancel_on_shutdown(self, scope: trio.CancelScope) -> None:
        await self.shutdown_requested.wait()
        scope.cancel()

    async def _allocate_producer_ids(self) -> tuple[int, int]:
        assert self.ctx is not None
        return await self.ctx.controller.allocate_producer_ids(self.config.node_id, self.ctx.broker_epoch)

    async def _create_offsets_topic(self, partitions: int, replication_factor: int) -> None:
        assert self.ctx is not None
        await self.ctx.controller.create_topic("__consumer_offsets", partitions, replication_factor,
                                               {"cleanup.policy": "compact"})

    async def _create_transaction_state_topic(self, partitions: int, replication_factor: int,
                                              configs: dict[str, str]) -> None:
        assert self.ctx is not None
        await self.ctx.controller.create_topic("__transaction_state", partitions, replication_factor, configs)

    async def _create_share_state_topic(self, partitions: int, replication_factor: int,
                                        configs: dict[str, str]) -> None:
        assert self.ctx is not None
        await self.ctx.controller.create_topic("__share_group_state", partitions, replication_factor, configs)

    async def _next_producer_id(self) -> int:
        assert self.ctx is not None
        return await self.ctx.producer_ids.next_id()

    async def _alter_partition(self, partition, new_isr: tuple[int, ...]) -> None:
        assert self.ctx is not None
        await self.ctx.controller.alter_partition(
            self.config.node_id, self.ctx.broker_epoch, partition.topic_id, partition.index,
            partition.leader_epoch, partition.partition_epoch, new_isr)

    async def _register(self, ctx: BrokerContext) -> None:
        incarnation = str(uuid.uuid4())
        listeners = advertised_endpoints(self.config, self.bound)
        rack = self.config.rack
        while True:
            try:
                ctx.broker_epoch = await ctx.controller.register_broker(
                    self.config.node_id, incarnation, listeners, rack)
                log.info("broker.registered", node_id=self.config.node_id, broker_epoch=ctx.broker_epoch)
                return
            except ControllerError as exc:
                log.info("broker.register_retry", reason=exc.message)
                if not await self._wait_for_controller(ctx):
                    await trio.sleep(REGISTER_RETRY_S)  # pacing: the refusal may last a session timeout

    async def _wait_for_controller(self, ctx: BrokerContext) -> bool:
        """Wait (up to 0.5 s) for an active controller; True if one appeared while waiting."""
        known = ctx.loader.active_controller_epoch() is not None
        with trio.move_on_after(0.5):
            await ctx.loader.wait_active_controller()
            return not known
        return False

    async def _heartbeat_once(self, ctx: BrokerContext, want_shutdown: bool = False):
        return await ctx.controller.heartbeat(self.config.node_id, ctx.broker_epoch, ctx.image.offset,
                                              want_shutdown)

    async def _wait_unfenced(self, ctx: BrokerContext) -> None:
        while True:
            try:
                reply = await self._heartbeat_once(ctx)
                if not reply.fenced:
                    return
            except ControllerError as exc:
                log.debug("broker.heartbeat_retry", reason=exc.message)
            await self._wait_for_controller(ctx)
            await trio.sleep(0.05)  # pacing between heartbeats, not synchronisation

    async def _heartbeat_loop(self, ctx: BrokerContext) -> None:
        interval = self.config.broker_heartbeat_interval_ms / 1000.0
        # A heartbeat stuck at a controller that lost its role must not outlive our session:
        # give up in time to send the next one to whoever is controller by then.
        patience = max(interval, self.config.broker_session_timeout_ms / 3000.0)
        while True:
            await trio.sleep(interval)
            try:
                with trio.move_on_after(patience) as scope:
                    reply = await self._heartbeat_once(ctx)
                if scope.cancelled_caught:
                    log.info("broker.heartbeat_timed_out", node_id=self.config.node_id, seconds=patience)
                    continue
                if reply.fenced and not self.shutdown_requested.is_set():
                    log.warning("broker.fenced", node_id=self.config.node_id)
            except ControllerError as exc:
                if exc.name in ("STALE_BROKER_EPOCH", "BROKER_ID_NOT_REGISTERED"):
                    log.warning("broker.reregistering", node_id=self.config.node_id, reason=exc.message)
                    await self._register(ctx)
                else:
                    log.debug("broker.heartbeat_failed", reason=exc.message)

    async def _controlled_shutdown(self, ctx: BrokerContext) -> None:
        ctx.serving = False
        unreachable_since: float | None = None
        with trio.move_on_after(CONTROLLED_SHUTDOWN_TIMEOUT_S) as scope:
            while True:
                try:
                    reply = await self._heartbeat_once(ctx, want_shutdown=True)
                    if reply.shutdown_ready:
                        log.info("broker.controlled_shutdown_done", node_id=self.config.node_id)
                        return
                    unreachable_since = None
                except ControllerError as exc:
                    log.debug("broker.controlled_shutdown_retry", reason=exc.message)
                    now = trio.current_time()
                    unreachable_since = unreachable_since or now
                    if now - unreachable_since > CONTROLLER_UNREACHABLE_S:
                        # No controller (e.g. the whole cluster is stopping and the quorum is gone):
                        # nobody could take our leaderships anyway.
                        log.warning("broker.controlled_shutdown_skipped", node_id=self.config.node_id,
                                    reason=exc.message)
                        return
                await trio.sleep(0.1)  # pacing between shutdown requests
        if scope.cancelled_caught:
            log.warning("broker.controlled_shutdown_timed_out", node_id=self.config.node_id)
