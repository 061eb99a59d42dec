"""The per-connection SASL state machine (broker/net/sasl_state.py), as tables."""

from __future__ import annotations

import pytest

from raftka.broker.net.sasl_state import (
    AUTHENTICATE,
    DONE,
    FAILED,
    HANDSHAKE,
    PreAuthViolation,
    SaslAuthenticator,
)
from raftka.client.protocol import ApiKey, ErrorCode
from raftka.client.protocol.scram import ScramClient, make_credential
from raftka.raft_meta.config.security_config import JaasConfig, ListenerSecurity

CREDS = {("alice", "SCRAM-SHA-256"): make_credential("SCRAM-SHA-256", "alice-secret")}
LISTENER = ListenerSecurity(
    "SASL_SSL", "SASL_SSL", None, ("PLAIN", "SCRAM-SHA-256"),
    {"PLAIN": JaasConfig("org.apache.kafka.common.security.plain.PlainLoginModule", "required",
                         {"username": "b", "password": "p", "user_bob": "bob-secret"})})


def auth() -> SaslAuthenticator:
    return SaslAuthenticator(LISTENER, lambda name, mech: CREDS.get((name, mech)))


# (requests in order, the one that must be refused or None)
ADMIT_CASES = [
    ([ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE], None),
    ([ApiKey.API_VERSIONS, ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE], None),  # retry after a v0 fallback
    ([ApiKey.API_VERSIONS] * 3, 2),
    ([ApiKey.METADATA], 0),
    ([ApiKey.PRODUCE], 0),
    ([ApiKey.SASL_AUTHENTICATE], 0),  # before the handshake
    ([ApiKey.API_VERSIONS, ApiKey.FETCH], 1),
]


@pytest.mark.parametrize(("keys", "refused_at"), ADMIT_CASES)
def test_pre_auth_gate(keys, refused_at):
    a = auth()
    for i, key in enumerate(keys):
        if i == refused_at:
            with pytest.raises(PreAuthViolation):
                a.admit(key)
            return
        a.admit(key)
        if key == ApiKey.SASL_HANDSHAKE:
            a.handshake("PLAIN")
    assert refused_at is None


PLAIN_CASES = [
    (b"\0bob\0bob-secret", 0, "User:bob", None),
    (b"bob\0bob\0bob-secret", 0, "User:bob", None),  # kafka-python's authzid = username
    (b"\0bob\0wrong", ErrorCode.SASL_AUTHENTICATION_FAILED, None, "Invalid username or password"),
    (b"\0nobody\0bob-secret", ErrorCode.SASL_AUTHENTICATION_FAILED, None, "Invalid username or password"),
    (b"\0\0x", ErrorCode.SASL_AUTHENTICATION_FAILED, None, "username not specified"),
    (b"eve\0bob\0bob-secret", ErrorCode.SASL_AUTHENTICATION_FAILED, None, "authorization id"),
    (b"bob-secret", ErrorCode.SASL_AUTHENTICATION_FAILED, None, "Invalid username or password"),
    (b"\0bob\0\xff", ErrorCode.SASL_AUTHENTICATION_FAILED, None, "Invalid username or password"),
]


@pytest.mark.parametrize(("token", "code", "principal", "message"), PLAIN_CASES)
def test_plain(token, code, principal, message):
    a = auth()
    assert a.handshake("PLAIN") == (0, ["PLAIN", "SCRAM-SHA-256"])
    got_code, got_message, reply = a.authenticate(token)
    assert (got_code, a.principal, reply) == (code, principal, b"")
    assert a.state == (DONE if code == 0 else FAILED)
    if message:
        assert message in got_message


def test_scram_two_round_trips():
    a = auth()
    a.handshake("SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
    code, _, server_first = a.authenticate(client.client_first())
    assert code == 0 and a.state == AUTHENTICATE
    code, _, server_final = a.authenticate(client.client_final(server_first))
    assert code == 0 and a.state == DONE and a.principal == "User:alice"
    client.verify_server_final(server_final)


@pytest.mark.parametrize("user", ["alice", "mallory"])
def test_scram_failures(user):
    a = auth()
    a.handshake("SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", user, "wrong")
    code, message, server_first = a.authenticate(client.client_first())
    if user == "mallory":  # unknown user: right after client-first
        assert code == ErrorCode.SASL_AUTHENTICATION_FAILED
    else:
        code, message, _ = a.authenticate(client.client_final(server_first))
        assert code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in message
    assert a.state == FAILED and a.principal is None
    with pytest.raises(PreAuthViolation):
        a.admit(ApiKey.SASL_AUTHENTICATE)


def test_mechanism_not_enabled():
    a = auth()
    assert a.handshake("SCRAM-SHA-512") == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, ["PLAIN", "SCRAM-SHA-256"])
    assert a.state == FAILED
    assert HANDSHAKE != a.state
