"""Request dispatch: decode a frame, route it to its handler, encode the answer.

Errors in the request itself (malformed bytes, an unknown API, an
unsupported version) close the connection after logging why — except
ApiVersions, which always gets an answer so clients can negotiate.
A handler that fails unexpectedly also closes the connection: the client
reconnects and retries, and no other connection is affected.
"""

from __future__ import annotations

import structlog
import trio

from raftka.broker.client_quotas import user_of
from raftka.broker.context import BrokerContext
from raftka.broker.handlers import (
    Handler,
    acls,
    alter_configs,
    api_versions,
    client_quotas,
    consumer_groups,
    delete_records,
    describe_cluster,
    describe_configs,
    describe_log_dirs,
    describe_quorum,
    describe_topic_partitions,
    elect_leaders,
    fetch,
    groups,
    init_producer_id,
    list_config_resources,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
    reassignments,
    scram_credentials,
    share_fetch,
    share_groups,
    share_state,
    topics_admin,
    transactions,
    txn_markers,
    txn_offset_commit,
    unregister_broker,
)
from raftka.broker.handlers import sasl as sasl_handlers
from raftka.broker.metrics import request_name
from raftka.broker.net.network import CloseConnection, ConnectionInfo, Deferred, FinalResponse
from raftka.broker.net.sasl_state import FAILED, PreAuthViolation
from raftka.broker.net.zero_copy import ChunkedResponse
from raftka.broker.replication.fetch_session_state import FINAL_EPOCH
from raftka.broker.replication.purgatory import DelayedResponse
from raftka.client.protocol import (
    ApiKey,
    ProtocolError,
    UnknownApi,
    UnsupportedVersion,
    api_versions_fallback_response,
    decode_request,
    encode_response,
    encode_response_chunks,
    expects_response,
    is_advertised,
    needs_api_versions_fallback,
    peek_request_header,
)
from raftka.client.protocol.api_keys import SERVED_UNADVERTISED_VERSIONS

log = structlog.get_logger("broker.requests")

HANDLERS: dict[ApiKey, Handler] = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_groups.handle_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_groups.handle_describe,
    ApiKey.SHARE_GROUP_HEARTBEAT: share_groups.handle_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: share_groups.handle_describe,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: share_groups.handle_describe_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: share_groups.handle_alter_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: share_groups.handle_delete_offsets,
    ApiKey.API_VERSIONS: api_versions.handle,
    ApiKey.METADATA: metadata.handle,
    ApiKey.PRODUCE: produce.handle,
    ApiKey.FETCH: fetch.handle,
    ApiKey.LIST_OFFSETS: list_offsets.handle,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch.handle,
    ApiKey.INIT_PRODUCER_ID: init_producer_id.handle,
    ApiKey.CREATE_TOPICS: topics_admin.handle_create_topics,
    ApiKey.DELETE_TOPICS: topics_admin.handle_delete_topics,
    ApiKey.CREATE_PARTITIONS: topics_admin.handle_create_partitions,
    ApiKey.DESCRIBE_CONFIGS: describe_configs.handle,
    ApiKey.FIND_COORDINATOR: groups.handle_find_coordinator,
    ApiKey.JOIN_GROUP: groups.handle_join_group,
    ApiKey.SYNC_GROUP: groups.handle_sync_group,
    ApiKey.HEARTBEAT: groups.handle_heartbeat,
    ApiKey.LEAVE_GROUP: groups.handle_leave_group,
    ApiKey.OFFSET_COMMIT: groups.handle_offset_commit,
    ApiKey.OFFSET_FETCH: groups.handle_offset_fetch,
    ApiKey.DESCRIBE_GROUPS: groups.handle_describe_groups,
    ApiKey.LIST_GROUPS: groups.handle_list_groups,
    ApiKey.DELETE_GROUPS: groups.handle_delete_groups,
    ApiKey.DESCRIBE_QUORUM: describe_quorum.handle,
    ApiKey.DESCRIBE_ACLS: acls.handle_describe_acls,
    ApiKey.CREATE_ACLS: acls.handle_create_acls,
    ApiKey.DELETE_ACLS: acls.handle_delete_acls,
    ApiKey.ALTER_CONFIGS: alter_configs.handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: alter_configs.handle_incremental_alter_configs,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster.handle,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: describe_topic_partitions.handle,
    ApiKey.LIST_CONFIG_RESOURCES: list_config_resources.handle,
    ApiKey.OFFSET_DELETE: groups.handle_offset_delete,
    ApiKey.ELECT_LEADERS: elect_leaders.handle,
    ApiKey.DELETE_RECORDS: delete_records.handle,
    ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs.handle,
    ApiKey.SASL_HANDSHAKE: sasl_handlers.handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: sasl_handlers.handle_sasl_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: scram_credentials.handle_describe,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: scram_credentials.handle_alter,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: reassignments.handle_alter,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: reassignments.handle_list,
    ApiKey.UNREGISTER_BROKER: unregister_broker.handle,
    ApiKey.ADD_PARTITIONS_TO_TXN: transactions.handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: transactions.handle_add_offsets_to_txn,
    ApiKey.END_TXN: transactions.handle_end_txn,
    ApiKey.DESCRIBE_TRANSACTIONS: transactions.handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: transactions.handle_list_transactions,
    ApiKey.WRITE_TXN_MARKERS: txn_markers.handle_write_txn_markers,
    ApiKey.DESCRIBE_PRODUCERS: txn_markers.handle_describe_producers,
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit.handle,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: client_quotas.handle_describe,
    ApiKey.SHARE_FETCH: share_fetch.handle_share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: share_fetch.handle_share_acknowledge,
    ApiKey.ALTER_CLIENT_QUOTAS: client_quotas.handle_alter,
    **share_state.HANDLERS,
}

class KafkaApis:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def handle(self, frame, conn: ConnectionInfo) -> bytes | ChunkedResponse | Deferred | None:
        header = peek_request_header(frame)
        if conn.authenticator is not None:  # a SASL listener, before authentication
            try:
                conn.authenticator.admit(header.api_key)
            except PreAuthViolation as exc:
                raise CloseConnection(f"{exc} (client {header.client_id!r})") from None
        if needs_api_versions_fallback(header):
            return api_versions_fallback_response(header.correlation_id)
        try:
            header, request = decode_request(frame)
        except UnsupportedVersion as exc:
            if header.api_key == ApiKey.API_VERSIONS:
                return api_versions_fallback_response(header.correlation_id)
            raise CloseConnection(f"{exc} (client {header.client_id!r})") from None
        except UnknownApi as exc:
            raise CloseConnection(f"{exc} (client {header.client_id!r})") from None
        key = ApiKey(header.api_key)
        if (not is_advertised(key, header.api_version) and key != ApiKey.PRODUCE
                and (key, header.api_version) not in SERVED_UNADVERTISED_VERSIONS):
            raise CloseConnection(
                f"{key.name} v{header.api_version} is not advertised by this broker (client {header.client_id!r})"
            )
        handler = HANDLERS.get(key)
        if handler is None:
            raise CloseConnection(f"{key.name} is not served by this broker")
        started = trio.current_time()
        name = _metric_name(key, request)
        quotas = self.ctx.client_quotas
        timer = quotas.timer
        timed = bool(self.ctx.image.client_quotas) and quotas.request.enabled(self.ctx.image.client_quotas)
        if timed != timer.installed:
            timer.ensure(timed)
        timed = timed and key not in _EXEMPT and not (key == ApiKey.FETCH and _follower(header, request))
        if timed:
            timer.start()
        try:
            response = await handler(self.ctx, header, request, conn)
        except ProtocolError:
            raise
        except Exception as exc:
            log.exception("request.failed", api=key.name, version=header.api_version, peer=conn.peer)
            raise CloseConnection(f"{key.name} handler failed: {exc!r}") from exc
        finally:
            busy_s = timer.stop() if timed else 0.0
        # KIP-124: the handler's time against request_percentage (a percentage of one second)
        request_ms = self._throttle(quotas.request, header, conn, busy_s * 100.0) if timed else 0
        throttle_ms = request_ms
        if key == ApiKey.PRODUCE and self.ctx.image.client_quotas:  # the request's size counts (KIP-13)
            throttle_ms = max(request_ms, self._throttle(quotas.produce, header, conn, len(frame)))
        if throttle_ms and not isinstance(response, DelayedResponse) and key != ApiKey.FETCH \
                and throttle_ms > getattr(response, "throttle_time_ms", throttle_ms):
            response.throttle_time_ms = throttle_ms  # a larger one (controller mutations) stays
        if isinstance(response, DelayedResponse):  # it waits in a purgatory (acks=all produce)

            async def finish() -> bytes:
                answered = await response.finish()
                answered.throttle_time_ms = throttle_ms
                if throttle_ms:  # Kafka mutes from the answer: again from now (after the ISR wait)
                    conn.muted_until = max(conn.muted_until, trio.current_time() + throttle_ms / 1000.0)
                answer = encode_response(header, key, header.api_version, answered)
                self.ctx.metrics.request_done(name, header.api_version, trio.current_time() - started)
                return answer

            return Deferred(finish)
        self.ctx.metrics.request_done(name, header.api_version, trio.current_time() - started)
        if not expects_response(header, request):
            return None
        authenticator = conn.authenticator
        if authenticator is not None and authenticator.state == FAILED:  # answered, then closed
            return FinalResponse(encode_response(header, key, header.api_version, response),
                                 f"SASL authentication failed ({key.name})")
        if key == ApiKey.SHARE_FETCH:  # record bytes stay in the segment files, as for Fetch
            return ChunkedResponse(encode_response_chunks(header, key, header.api_version, response))
        if key == ApiKey.FETCH:  # record bytes stay in the segment files (see broker/net/zero_copy.py)
            chunks = encode_response_chunks(header, key, header.api_version, response)
            if request.replica_id < 0 and self.ctx.image.client_quotas:  # a consumer: its response's size
                size = sum(map(len, chunks[1:]))
                throttle_ms = max(request_ms, self._throttle(self.ctx.client_quotas.fetch, header, conn, size))
                if throttle_ms:
                    response.throttle_time_ms = throttle_ms
                    if getattr(request, "session_epoch", FINAL_EPOCH) == FINAL_EPOCH:
                        # Kafka answers a throttled fetch empty and takes its bytes back off the
                        # meter. Only without a fetch session here: a session has already moved
                        # on to what this answer carries (docs/compatibility.md).
                        self.ctx.client_quotas.fetch.unrecord(self.ctx.image.client_quotas, user_of(conn.principal),
                                                              header.client_id or "", size, trio.current_time())
                        response.responses = []
                    chunks = encode_response_chunks(header, key, header.api_version, response)
            return ChunkedResponse(chunks)
        return encode_response(header, key, header.api_version, response)

    def _throttle(self, quota, header, conn: ConnectionInfo, nbytes: float) -> int:
        """Record `nbytes` (or request time) against the connection's quota; mute the connection
        for the throttle time, which is returned for the response (broker/client_quotas.py)."""
        now = trio.current_time()
        throttle_ms = quota.record(self.ctx.image.client_quotas, user_of(conn.principal), header.client_id or "",
                                   nbytes, now)
        if throttle_ms:
            conn.muted_until = max(conn.muted_until, now + throttle_ms / 1000.0)
        return throttle_ms


# Inter-broker requests: never request-quota'd (Kafka answers them with sendResponseExemptThrottle).
_EXEMPT = frozenset({ApiKey.WRITE_TXN_MARKERS})


def _follower(header, request) -> bool:
    """A follower's Fetch (before the handler moved v15's replica_state.replica_id up)."""
    if header.api_version >= fetch.REPLICA_STATE_VERSION:
        return request.replica_state.replica_id >= 0
    return request.replica_id >= 0


def _metric_name(key: ApiKey, request) -> str:
    """Kafka's RequestMetrics name: Fetch splits into FetchConsumer and FetchFollower."""
    if key == ApiKey.FETCH:
        return "FetchFollower" if getattr(request, "replica_id", -1) >= 0 else "FetchConsumer"
    return _NAMES.get(key) or _NAMES.setdefault(key, request_name(key.name))


_NAMES: dict[ApiKey, str] = {}
