"""raftka's Kafka wire codec, sans-IO (no sockets, no trio: bytes in, bytes out).

Layout
------
- `schema.py`    the vocabulary (Field, MessageSchema, Kafka version notation)
- `schemas.py`   every API's request/response declared once, as data
                 (generated from Kafka's JSON specs by `generate_schemas.py`)
- `codec.py`     the generic walker: MessageCodec compiles a schema per version
                 into precompiled decode/encode plans and builds message classes
- `headers.py`   request header v0-v2, response header v0-v1, header versions
- `framing.py`   FrameDecoder / encode_frame (4-byte size prefix)
- `messages.py`  whole frames: decode_request, encode_response, encode_request,
                 decode_response, the ApiVersions v0 fallback
- `api_keys.py`  ApiKey, ADVERTISED_VERSIONS (what ApiVersions answers), flexibility
- `errors.py`    Kafka error codes (ErrorCode, error_info)
- `exceptions.py` ProtocolError and its kinds

Broker side
-----------
::

    decoder = FrameDecoder(max_frame_size=100 << 20)    # FrameTooLarge if exceeded
    for frame in decoder.feed(chunk):
        try:
            header = peek_request_header(frame)
            if needs_api_versions_fallback(header):      # ApiVersions above v4
                send(api_versions_fallback_response(header.correlation_id))
                continue
            header, req = decode_request(frame)
        except (UnsupportedVersion, UnknownApi) as exc:  # exc.header says who asked
            ...                                          # answer 35, or close
        except ProtocolError:
            ...                                          # log why, close
        # attribute access, Kafka's field names snake_cased:
        records = req.topic_data[0].partition_data[0].records  # zero-copy memoryview
        resp = ProduceResponse(responses=[
            {"name": "t", "partition_responses": [{"index": 0, "base_offset": 42}]},
        ])                                               # dicts or classes; defaults fill in
        if expects_response(header, req):
            send(encode_response(header, header.api_key, header.api_version, resp))

SDK side
--------
::

    send(encode_request(ApiKey.METADATA, 8, correlation_id, MetadataRequest(topics=None),
                        client_id="raftka"))
    for frame in decoder.feed(chunk):
        cid = peek_correlation_id(frame)
        header, resp = decode_response(ApiKey.METADATA, 8, frame)

Messages
--------
Each API has a request and a response class (`ProduceRequest`, `FetchResponse`,
...; also `request_class(api_key)` / `response_class(api_key)`), with nested
struct classes as attributes (`ProduceResponse.PartitionProduceResponse`).
They are plain mutable objects: keyword construction, every field of every
version present as an attribute (fields outside the encoded version keep
their defaults and are not sent), `==`, `repr`, `to_dict()`. Nested structs
may be given as dicts when encoding. `records` fields decode to memoryview
slices of the frame (no copy); `bytes` fields to bytes.

Errors
------
Malformed, truncated or hostile input raises a `ProtocolError` subclass only
(TruncatedMessage, MalformedMessage, FrameTooLarge, UnknownApi,
UnsupportedVersion); declared lengths are checked against the remaining bytes
before any allocation. Building an unencodable message raises `EncodeError`
(a ValueError) whose `path` names the field.
"""

from typing import TYPE_CHECKING, TypeAlias

from raftka.client.protocol.api_keys import (
    ADVERTISED_VERSIONS,
    DECLARED_VERSIONS,
    FIRST_FLEXIBLE_VERSION,
    SERVED_VERSIONS,
    ApiKey,
    is_advertised,
    is_flexible,
)
from raftka.client.protocol.codec import Message, MessageCodec
from raftka.client.protocol.errors import (
    ERRORS,
    ErrorCode,
    KafkaErrorInfo,
    error_code_named,
    error_info,
    is_retriable,
)
from raftka.client.protocol.exceptions import (
    EncodeError,
    FrameTooLarge,
    MalformedMessage,
    ProtocolError,
    TruncatedMessage,
    UnknownApi,
    UnsupportedVersion,
)
from raftka.client.protocol.framing import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, encode_frame
from raftka.client.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    request_header_version,
    response_header_version,
)
from raftka.client.protocol.messages import (
    MESSAGE_CLASSES,
    api_versions_fallback_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_chunks,
    expects_response,
    needs_api_versions_fallback,
    peek_correlation_id,
    peek_request_header,
    request_class,
    response_class,
)

# The message classes, importable by name: `from raftka.client.protocol import ProduceRequest`.
# Their fields come from the schemas at import time, so to a type checker each is a Message
# (whose attributes are then Any).
if TYPE_CHECKING:
    ProduceRequest: TypeAlias = Message
    ProduceResponse: TypeAlias = Message
    FetchRequest: TypeAlias = Message
    FetchResponse: TypeAlias = Message
    ListOffsetsRequest: TypeAlias = Message
    ListOffsetsResponse: TypeAlias = Message
    MetadataRequest: TypeAlias = Message
    MetadataResponse: TypeAlias = Message
    OffsetCommitRequest: TypeAlias = Message
    OffsetCommitResponse: TypeAlias = Message
    OffsetFetchRequest: TypeAlias = Message
    OffsetFetchResponse: TypeAlias = Message
    FindCoordinatorRequest: TypeAlias = Message
    FindCoordinatorResponse: TypeAlias = Message
    JoinGroupRequest: TypeAlias = Message
    JoinGroupResponse: TypeAlias = Message
    HeartbeatRequest: TypeAlias = Message
    HeartbeatResponse: TypeAlias = Message
    LeaveGroupRequest: TypeAlias = Message
    LeaveGroupResponse: TypeAlias = Message
    SyncGroupRequest: TypeAlias = Message
    SyncGroupResponse: TypeAlias = Message
    DescribeGroupsRequest: TypeAlias = Message
    DescribeGroupsResponse: TypeAlias = Message
    ListGroupsRequest: TypeAlias = Message
    ListGroupsResponse: TypeAlias = Message
    ApiVersionsRequest: TypeAlias = Message
    ApiVersionsResponse: TypeAlias = Message
    CreateTopicsRequest: TypeAlias = Message
    CreateTopicsResponse: TypeAlias = Message
    DeleteTopicsRequest: TypeAlias = Message
    DeleteTopicsResponse: TypeAlias = Message
    InitProducerIdRequest: TypeAlias = Message
    InitProducerIdResponse: TypeAlias = Message
    OffsetForLeaderEpochRequest: TypeAlias = Message
    OffsetForLeaderEpochResponse: TypeAlias = Message
    DescribeConfigsRequest: TypeAlias = Message
    DescribeConfigsResponse: TypeAlias = Message
    CreatePartitionsRequest: TypeAlias = Message
    CreatePartitionsResponse: TypeAlias = Message
    DeleteGroupsRequest: TypeAlias = Message
    DeleteGroupsResponse: TypeAlias = Message
else:
    ProduceRequest = request_class(ApiKey.PRODUCE)
    ProduceResponse = response_class(ApiKey.PRODUCE)
    FetchRequest = request_class(ApiKey.FETCH)
    FetchResponse = response_class(ApiKey.FETCH)
    ListOffsetsRequest = request_class(ApiKey.LIST_OFFSETS)
    ListOffsetsResponse = response_class(ApiKey.LIST_OFFSETS)
    MetadataRequest = request_class(ApiKey.METADATA)
    MetadataResponse = response_class(ApiKey.METADATA)
    OffsetCommitRequest = request_class(ApiKey.OFFSET_COMMIT)
    OffsetCommitResponse = response_class(ApiKey.OFFSET_COMMIT)
    OffsetFetchRequest = request_class(ApiKey.OFFSET_FETCH)
    OffsetFetchResponse = response_class(ApiKey.OFFSET_FETCH)
    FindCoordinatorRequest = request_class(ApiKey.FIND_COORDINATOR)
    FindCoordinatorResponse = response_class(ApiKey.FIND_COORDINATOR)
    JoinGroupRequest = request_class(ApiKey.JOIN_GROUP)
    JoinGroupResponse = response_class(ApiKey.JOIN_GROUP)
    HeartbeatRequest = request_class(ApiKey.HEARTBEAT)
    HeartbeatResponse = response_class(ApiKey.HEARTBEAT)
    LeaveGroupRequest = request_class(ApiKey.LEAVE_GROUP)
    LeaveGroupResponse = response_class(ApiKey.LEAVE_GROUP)
    SyncGroupRequest = request_class(ApiKey.SYNC_GROUP)
    SyncGroupResponse = response_class(ApiKey.SYNC_GROUP)
    DescribeGroupsRequest = request_class(ApiKey.DESCRIBE_GROUPS)
    DescribeGroupsResponse = response_class(ApiKey.DESCRIBE_GROUPS)
    ListGroupsRequest = request_class(ApiKey.LIST_GROUPS)
    ListGroupsResponse = response_class(ApiKey.LIST_GROUPS)
    ApiVersionsRequest = request_class(ApiKey.API_VERSIONS)
    ApiVersionsResponse = response_class(ApiKey.API_VERSIONS)
    CreateTopicsRequest = request_class(ApiKey.CREATE_TOPICS)
    CreateTopicsResponse = response_class(ApiKey.CREATE_TOPICS)
    DeleteTopicsRequest = request_class(ApiKey.DELETE_TOPICS)
    DeleteTopicsResponse = response_class(ApiKey.DELETE_TOPICS)
    InitProducerIdRequest = request_class(ApiKey.INIT_PRODUCER_ID)
    InitProducerIdResponse = response_class(ApiKey.INIT_PRODUCER_ID)
    OffsetForLeaderEpochRequest = request_class(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    OffsetForLeaderEpochResponse = response_class(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    DescribeConfigsRequest = request_class(ApiKey.DESCRIBE_CONFIGS)
    DescribeConfigsResponse = response_class(ApiKey.DESCRIBE_CONFIGS)
    CreatePartitionsRequest = request_class(ApiKey.CREATE_PARTITIONS)
    CreatePartitionsResponse = response_class(ApiKey.CREATE_PARTITIONS)
    DeleteGroupsRequest = request_class(ApiKey.DELETE_GROUPS)
    DeleteGroupsResponse = response_class(ApiKey.DELETE_GROUPS)

__all__ = [
    "ADVERTISED_VERSIONS",
    "DECLARED_VERSIONS",
    "DEFAULT_MAX_FRAME_SIZE",
    "ERRORS",
    "FIRST_FLEXIBLE_VERSION",
    "MESSAGE_CLASSES",
    "SERVED_VERSIONS",
    "ApiKey",
    "EncodeError",
    "ErrorCode",
    "FrameDecoder",
    "FrameTooLarge",
    "KafkaErrorInfo",
    "MalformedMessage",
    "Message",
    "MessageCodec",
    "ProtocolError",
    "RequestHeader",
    "ResponseHeader",
    "TruncatedMessage",
    "UnknownApi",
    "UnsupportedVersion",
    "api_versions_fallback_response",
    "decode_request",
    "decode_response",
    "encode_frame",
    "encode_request",
    "encode_response",
    "encode_response_chunks",
    "error_code_named",
    "error_info",
    "expects_response",
    "is_advertised",
    "is_flexible",
    "is_retriable",
    "needs_api_versions_fallback",
    "peek_correlation_id",
    "peek_request_header",
    "request_class",
    "request_header_version",
    "response_class",
    "response_header_version",
    *MESSAGE_CLASSES,
]
