"""The control RPC's sans-IO part: hellos, sealed frames, the slow key (broker/net/control_rpc.py)."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from raftka.broker.net.control_rpc import (
    HELLO_MAGIC,
    ControlSession,
    RpcProtocolError,
    check_arguments,
    derive_cluster_key,
    encode_hello,
    parse_hello,
)

KEY = derive_cluster_key("control-session-test-secret", "AAAAAAAAAAAAAAAAAAAAAA")
CLIENT_NONCE, SERVER_NONCE = b"c" * 16, b"s" * 16


def _pair(key: bytes = KEY, server_nonce: bytes = SERVER_NONCE) -> tuple[ControlSession, ControlSession]:
    client = ControlSession(key, CLIENT_NONCE, SERVER_NONCE, is_client=True)
    server = ControlSession(key, CLIENT_NONCE, server_nonce, is_client=False)
    return client, server


def _body(frame: bytes) -> bytes:
    return frame[4:]


def test_frames_round_trip_in_both_directions_in_order() -> None:
    client, server = _pair()
    for i in range(3):
        assert server.open(_body(client.seal({"id": i, "method": "heartbeat"}))) == {"id": i, "method": "heartbeat"}
        assert client.open(_body(server.seal({"id": i, "ok": None}))) == {"id": i, "ok": None}


@pytest.mark.parametrize(
    "attack",
    [
        "replayed on the same connection",
        "replayed on another connection",
        "reflected to its sender",
        "payload changed",
        "length changed",
        "other cluster key",
        "frame skipped",
    ],
)
def test_a_frame_opens_only_once_only_where_it_was_sealed(attack: str) -> None:
    client, server = _pair()
    frame = client.seal({"id": 1, "method": "delete_topic", "args": {"name": "t"}})
    receiver, body = server, _body(frame)
    if attack == "replayed on the same connection":
        server.open(body)
    elif attack == "replayed on another connection":
        _, receiver = _pair(server_nonce=b"S" * 16)
    elif attack == "reflected to its sender":
        receiver = client
    elif attack == "payload changed":
        body = body[:-1] + bytes([body[-1] ^ 1])
    elif attack == "length changed":
        body = body + b"\x00"
    elif attack == "other cluster key":
        _, receiver = _pair(key=derive_cluster_key("control-session-test-secret", "BBBBBBBBBBBBBBBBBBBBBB"))
    elif attack == "frame skipped":
        body = _body(client.seal({"id": 2, "method": "heartbeat"}))  # the first never arrived
    with pytest.raises(RpcProtocolError, match="failed authentication"):
        receiver.open(body)


def test_the_mac_covers_the_length_prefix() -> None:
    client, _ = _pair()
    frame = client.seal({"id": 1})
    session_key = hmac.new(KEY, b"raftka control session" + CLIENT_NONCE + SERVER_NONCE, hashlib.sha256).digest()
    expected = hmac.new(session_key, b"C" + (0).to_bytes(8, "big") + frame[:4] + frame[36:], hashlib.sha256).digest()
    assert frame[4:36] == expected


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "got 0 bytes"),
        (HELLO_MAGIC + b"n" * 15, "got 19 bytes"),
        (b"RKC1" + b"n" * 16, "starting b'RKC1'"),
        (b"\x00" * 32 + b"\xa0", "got 33 bytes"),  # an old-style MAC'd frame
    ],
)
def test_a_bad_hello_names_what_was_expected(body: bytes, message: str) -> None:
    with pytest.raises(RpcProtocolError, match="expected a control hello") as info:
        parse_hello(body)
    assert message in str(info.value)


def test_hello_round_trip() -> None:
    assert parse_hello(encode_hello(b"n" * 16)[4:]) == b"n" * 16


def test_the_cluster_key_refuses_a_short_secret_without_printing_it() -> None:
    with pytest.raises(ValueError, match="is 5 bytes long; expected at least 16") as info:
        derive_cluster_key("short", "AAAAAAAAAAAAAAAAAAAAAA")
    assert "short" not in str(info.value) and "random-uuid" in str(info.value)


def test_the_cluster_key_depends_on_secret_and_cluster() -> None:
    keys = {derive_cluster_key(s, c) for s in ("first-secret-16by", "second-secret-16b")
            for c in ("AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB")}
    assert len(keys) == 4


@pytest.mark.parametrize(
    ("method", "args", "problem"),
    [
        ("delete_topic", {"name": "t"}, None),
        ("delete_topic", {"name": "t", "request_id": None}, None),
        ("heartbeat", {"broker_id": 1, "broker_epoch": 5, "metadata_offset": 9, "want_shutdown": True}, None),
        ("heartbeat", {"broker_id": 1, "broker_epoch": 5, "metadata_offset": 9, "want_shutdown": 1},
         "argument 'want_shutdown' of heartbeat is a int; expected true or false"),
        ("create_topic", {"name": "t", "configs": {"a": "b"}}, None),
        ("create_topic", {"name": "t", "configs": [1]},
         "argument 'configs' of create_topic is a list; expected a map of string to string, or null"),
        ("create_partitions", {"totals": [["t", -(2**63) - 1]]}, "argument 'totals'"),
        ("create_topics", {"topics": [{"name": "t", "configs": [1]}]}, "argument 'topics'"),
        ("create_topics", {"topics": [{"name": "t", "num_partitions": 3}], "timeout_ms": 100}, None),
        ("allocate_producer_ids", {"broker_id": 1}, "argument 'broker_epoch' of allocate_producer_ids is missing"),
        ("create_acls", {"acls": [[2, "t", 3, "User:a", "*", 3, 3]]}, None),
        ("create_acls", {"acls": [[2, None, 3, "User:a", "*", 3, 3]]}, "argument 'acls'"),
        ("delete_acls", {"filters": [[1, None, 1, None, None, 1, 1]]}, None),
        ("delete_acls", {"filters": [[1, None, 1, None, None, 1]]}, "argument 'filters'"),
    ],
)
def test_arguments_are_checked_against_the_signature(method: str, args: dict, problem: str | None) -> None:
    found = check_arguments(method, args)
    assert (found is None) if problem is None else (found is not None and problem in found)
