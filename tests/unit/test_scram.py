"""SCRAM core (client/protocol/scram.py): RFC 7677's vector and Kafka's rules, as tables."""

from __future__ import annotations

import base64

import pytest

from raftka.client.protocol.scram import (
    ScramClient,
    ScramError,
    ScramServer,
    credential_from_salted_password,
    escape_name,
    make_credential,
    parse_client_first,
    salted_password,
    unescape_name,
)

# RFC 7677 section 3.
RFC_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SNONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credential():
    return make_credential("SCRAM-SHA-256", "pencil", iterations=4096, salt=RFC_SALT)


def test_rfc7677_vector_client_side():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_NONCE)
    assert client.client_first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.client_final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify_server_final(RFC_SERVER_FINAL)


def test_rfc7677_vector_server_side():
    server = ScramServer("SCRAM-SHA-256", {"user": rfc_credential()}.get)
    assert server.receive_client_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", snonce=RFC_SNONCE) == RFC_SERVER_FIRST
    assert server.receive_client_final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.name == "user"


def test_stored_credential_never_holds_the_password():
    cred = rfc_credential()
    assert b"pencil" not in cred.salt + cred.stored_key + cred.server_key
    salted = salted_password("SCRAM-SHA-256", "pencil", RFC_SALT, 4096)
    assert credential_from_salted_password("SCRAM-SHA-256", salted, RFC_SALT, 4096) == cred


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("name", ["alice", "a,b=c", "ünï"])
def test_round_trip(mechanism, name):
    server = ScramServer(mechanism, {name: make_credential(mechanism, "s3cret")}.get)
    client = ScramClient(mechanism, name, "s3cret")
    final = server.receive_client_final(client.client_final(server.receive_client_first(client.client_first())))
    client.verify_server_final(final)
    assert server.name == name


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_fails_at_client_final(mechanism):
    server = ScramServer(mechanism, {"alice": make_credential(mechanism, "right")}.get)
    client = ScramClient(mechanism, "alice", "wrong")
    server_first = server.receive_client_first(client.client_first())
    with pytest.raises(ScramError, match="invalid credentials"):
        server.receive_client_final(client.client_final(server_first))
    assert server.name is None


CLIENT_FIRST_ERRORS = [
    (b"y,,n=user,r=abc", "gs2 flag"),
    (b"p=tls-unique,,n=user,r=abc", "gs2 flag"),
    (b"n,,r=abc,n=user", "expected n=<name>,r=<nonce>"),
    (b"n,,n=user", "malformed client-first"),
    (b"n,,n=,r=abc", "user name is empty"),
    (b"n,,n=user,r=", "nonce is empty"),
    (b"n,x=1,n=user,r=abc", "authzid"),
    (b"\xff\xfe", "not UTF-8"),
    (b"n,,n=user,r=abc,tokenauth=true", "delegation tokens"),
    (b"n,,n=nobody,r=abc", "unknown user"),
    (b"n,a=other,n=user,r=abc", "authorization id differs"),
]


@pytest.mark.parametrize(("message", "error"), CLIENT_FIRST_ERRORS)
def test_client_first_refusals(message, error):
    server = ScramServer("SCRAM-SHA-256", {"user": rfc_credential()}.get)
    with pytest.raises(ScramError, match=error):
        server.receive_client_first(message)


def test_extensions_other_than_tokenauth_are_ignored():
    assert parse_client_first(b"n,,n=user,r=abc,foo=bar").extensions == (("foo", "bar"),)
    server = ScramServer("SCRAM-SHA-256", {"user": rfc_credential()}.get)
    assert server.receive_client_first(b"n,,n=user,r=abc,x=1").startswith(b"r=abc")


def _fresh_server():
    server = ScramServer("SCRAM-SHA-256", {"user": rfc_credential()}.get)
    server.receive_client_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", snonce=RFC_SNONCE)
    return server


CLIENT_FINAL_ERRORS = [
    (RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"), "channel binding"),
    (RFC_CLIENT_FINAL.replace(b"hNlF$k0", b"hNlF$k1"), "nonce does not match"),
    (b"c=biws,r=x", "expected ...,p=<proof>"),
    (RFC_CLIENT_FINAL[:-8] + b"AAAAAAA=", "invalid credentials"),
    (RFC_CLIENT_FINAL.replace(b"p=dHzb", b"p=!!!!"), "not valid base64"),
    (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAA", "wrong length"),
]


@pytest.mark.parametrize(("message", "error"), CLIENT_FINAL_ERRORS)
def test_client_final_refusals(message, error):
    with pytest.raises(ScramError, match=error):
        _fresh_server().receive_client_final(message)


def test_final_before_first_and_twice():
    server = ScramServer("SCRAM-SHA-256", {"user": rfc_credential()}.get)
    with pytest.raises(ScramError, match="before client-first"):
        server.receive_client_final(RFC_CLIENT_FINAL)
    server = _fresh_server()
    server.receive_client_final(RFC_CLIENT_FINAL)
    with pytest.raises(ScramError, match="twice"):
        server.receive_client_final(RFC_CLIENT_FINAL)


@pytest.mark.parametrize(("iterations", "ok"), [(4095, False), (4096, True), (16384, True), (16385, False)])
def test_iteration_bounds(iterations, ok):
    if ok:
        assert make_credential("SCRAM-SHA-512", "x", iterations=iterations).iterations == iterations
    else:
        with pytest.raises(ScramError, match="outside 4096..16384"):
            make_credential("SCRAM-SHA-512", "x", iterations=iterations)


@pytest.mark.parametrize(("raw", "escaped"), [("a,b", "a=2Cb"), ("a=b", "a=3Db"), ("plain", "plain")])
def test_name_escaping(raw, escaped):
    assert escape_name(raw) == escaped
    assert unescape_name(escaped) == raw


def test_bad_escape_is_refused():
    with pytest.raises(ScramError, match="invalid escape"):
        unescape_name("a=41")


def test_client_refuses_a_forged_server_signature():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_NONCE)
    client.client_final(RFC_SERVER_FIRST)
    with pytest.raises(ScramError, match="does not verify"):
        client.verify_server_final(b"v=" + base64.b64encode(b"x" * 32))


def test_unknown_mechanism():
    with pytest.raises(ScramError, match="unknown SCRAM mechanism"):
        make_credential("SCRAM-SHA-1", "x")
