"""raftka's metadata layer: KRaft-style records, image, controller and quorum (docs/architecture.md).

Imports nothing of raftka's above it (never broker/ or client/); pysyncobj is
imported only by `raft_meta.quorum`, `raft_meta.quorum_transport` (its TCP
transport, bounded against unauthenticated peers) and `raft_meta.quorum_admin`.

Modules and the API the broker calls
------------------------------------
node_config      `load_node_config(path) -> NodeConfig` (frozen; Kafka keys and
                 defaults; `ConfigError` names key, value, expectation).
                 `NodeConfig.quorum_bind_address()`, `.controller_rpc_address(node_id)`
                 (derived: voter host, voter port + `controller.rpc.port.offset`,
                 default 1), `.advertised()`, `.broker_listeners()`.
storage_format   `random_cluster_id()`, `format_storage(config, cluster_id)`,
                 `verify_storage(config) -> cluster_id` (raises `StorageError` on
                 unformatted / other node's / mixed-cluster dirs: call before starting).
records          frozen record dataclasses (RegisterBroker, UnregisterBroker,
                 FenceBroker, UnfenceBroker, Topic, RemoveTopic, Partition,
                 PartitionChange, Config, ProducerIds, ControllerClaim),
                 `encode_record`, `decode_record` (never raises), `NO_LEADER`.
image            `MetadataImage` (brokers, topics + partitions, configs,
                 producer-id blocks, controller, cluster_id), `MetadataDelta`.
apply            `apply(image, record, offset) -> (image, delta)`: pure; rejects
                 stale epochs / duplicate request ids deterministically.
quorum           `async with open_quorum_from_config(config) as quorum:` (or
                 `open_quorum(node_id, voters, secret, metadata_dir, ...)`);
                 `await quorum.submit(record) -> offset` (`SubmitError`),
                 `quorum.records_from(offset)`, `quorum.feed(offset)`,
                 `quorum.status()`, `quorum.leadership()`.
metadata_loader  `MetadataLoader(quorum, cluster_id, publishers)`; run it with
                 `await nursery.start(loader.run)`. Publishers are called as
                 `publisher(delta, new_image)`; `loader.image` is the current image;
                 `loader.active_controller_epoch()` / `await wait_active_controller()`.
                 Raises `ClusterIdMismatch` if the quorum is another cluster's.
controller       `Controller(config, quorum, loader)`; `await nursery.start(controller.run)`
                 on every controller node (it acts only while active). The broker's
                 control-channel RPC calls `register_broker`, `heartbeat`,
                 `alter_partition`, `create_topics` (`create_topic`),
                 `create_partitions`, `delete_topic`, `allocate_producer_ids`;
                 each raises `ControllerError` (Kafka error name + code;
                 NOT_CONTROLLER when this node is not the active controller,
                 REQUEST_TIMED_OUT when the commit is still pending at the
                 request's deadline, POLICY_VIOLATION over
                 MAX_RECORDS_PER_USER_OP).
controller_decisions  the pure decisions behind the Controller (placement,
                 topic creation with the per-request record cap, fencing,
                 elections incl. unclean, AlterPartition, controlled shutdown,
                 preferred-leader rebalance).
quorum_admin     `describe_quorum(config)` for `raftka quorum status` (blocking).

Wiring a node (the broker's job)::

    config = load_node_config(path)
    cluster_id = verify_storage(config)
    async with open_quorum_from_config(config) as quorum, trio.open_nursery() as n:
        loader = MetadataLoader(quorum, cluster_id, [replica_manager.publish, ...])
        await n.start(loader.run)
        controller = Controller(config, quorum, loader)
        await n.start(controller.run)
        # RPC server on config.controller_rpc_address(config.node_id) -> controller.*
"""
