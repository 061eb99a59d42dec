"""SCRAM credentials in the metadata log: records, apply, snapshot, the controller's decision,
and Kafka's --add-scram syntax (tables)."""

from __future__ import annotations

import base64

import pytest

from raftka.cli.scram_args import parse_scram_argument
from raftka.raft_meta.metadata.apply import replay
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.metadata.records import (
    RemoveUserScramCredential,
    UserScramCredential,
    decode_record,
    encode_record,
)
from raftka.raft_meta.metadata.snapshot import decode_snapshot, encode_snapshot, image_digest
from raftka.raft_meta.security.scram_decisions import ScramUpsertion, alter_scram_credentials

CRED = dict(salt=b"s" * 32, stored_key=b"k" * 32, server_key=b"v" * 32, iterations=4096)


def test_records_round_trip():
    for record in (UserScramCredential("alice", 1, **CRED), RemoveUserScramCredential("alice", 2)):
        assert decode_record(encode_record(record)) == record


APPLY_CASES = [
    ([UserScramCredential("alice", 1, **CRED)], {("alice", 1)}, None),
    ([UserScramCredential("alice", 1, **CRED), RemoveUserScramCredential("alice", 1)], set(), None),
    ([RemoveUserScramCredential("alice", 1)], set(), "no SCRAM credential"),
    ([UserScramCredential("alice", 3, **CRED)], set(), "mechanism 3"),
    ([UserScramCredential("", 1, **CRED)], set(), "empty user name"),
    ([UserScramCredential("alice", 1, **{**CRED, "iterations": 4095})], set(), "outside 4096..16384"),
    ([UserScramCredential("alice", 1, **{**CRED, "stored_key": b""})], set(), "lacks"),
]


@pytest.mark.parametrize(("records", "stored", "rejection"), APPLY_CASES)
def test_apply(records, stored, rejection):
    from raftka.raft_meta.metadata.apply import apply_entry

    image = MetadataImage()
    reasons = []
    for offset, record in enumerate(records, start=1):
        image, deltas = apply_entry(image, record, offset)
        reasons += [d.reason for d in deltas if not d.accepted]
    assert set(image.scram_credentials) == stored
    if rejection:
        assert any(rejection in r for r in reasons), reasons
    else:
        assert not reasons


def test_snapshot_keeps_credentials():
    image = replay([(1, UserScramCredential("alice", 1, **CRED)), (2, UserScramCredential("bob", 2, **CRED))])
    loaded = decode_snapshot(encode_snapshot(image))
    assert loaded.scram_credentials == image.scram_credentials
    assert image_digest(loaded) == image_digest(image)


def _up(name, mechanism=1, iterations=4096):
    return ScramUpsertion(name, mechanism, iterations, b"s", b"k", b"v")


IMAGE = replay([(1, UserScramCredential("alice", 1, **CRED))])
DECISION_CASES: list = [
    ([], [_up("bob")], {"bob": None}, 1),
    ([("alice", 1)], [], {"alice": None}, 1),
    ([("alice", 2)], [], {"alice": "RESOURCE_NOT_FOUND"}, 0),
    ([], [_up("")], {"": "UNACCEPTABLE_CREDENTIAL"}, 0),
    ([], [_up("bob", iterations=100)], {"bob": "UNACCEPTABLE_CREDENTIAL"}, 0),
    ([], [_up("bob", iterations=20000)], {"bob": "UNACCEPTABLE_CREDENTIAL"}, 0),
    ([], [_up("bob", mechanism=9)], {"bob": "UNSUPPORTED_SASL_MECHANISM"}, 0),
    ([], [_up("bob"), _up("bob")], {"bob": "DUPLICATE_RESOURCE"}, 0),
    ([], [_up("bob", 1), _up("bob", 2)], {"bob": None}, 2),  # both mechanisms of one user
    ([("alice", 2)], [_up("alice", 1), _up("bob")], {"alice": "RESOURCE_NOT_FOUND", "bob": None}, 1),
]


@pytest.mark.parametrize(("deletions", "upsertions", "results", "records"), [
    *DECISION_CASES, ([], [_up(f"u{i}") for i in range(10_001)], {f"u{i}": "POLICY_VIOLATION" for i in range(10_001)}, 0)])
def test_alter_decision(deletions, upsertions, results, records):
    out, got = alter_scram_credentials(IMAGE, deletions, upsertions)
    assert {r.user: r.error for r in got} == results
    assert len(out) == records


ARG_CASES = [
    ("SCRAM-SHA-256=[name=alice,password=alice-secret]", ("SCRAM-SHA-256", "alice", 4096, "alice-secret")),
    ('SCRAM-SHA-512=[name="a,b",password="p=,q",iterations=8192]', ("SCRAM-SHA-512", "a,b", 8192, "p=,q")),
    ("scram-sha-256=[iterations=5000,password=x,name=n]", ("SCRAM-SHA-256", "n", 5000, "x")),
]


@pytest.mark.parametrize(("text", "expected"), ARG_CASES)
def test_add_scram_syntax(text, expected):
    arg = parse_scram_argument(text, need_name=True)
    assert (arg.mechanism, arg.name, arg.iterations, arg.password) == expected


def test_add_scram_salted_password():
    salt, salted = base64.b64encode(b"salt").decode(), base64.b64encode(b"x" * 32).decode()
    arg = parse_scram_argument(f"SCRAM-SHA-256=[name=a,salt={salt},saltedpassword={salted}]", need_name=True)
    assert arg.credential().salt == b"salt"


@pytest.mark.parametrize(("text", "error"), [
    ("SCRAM-SHA-1=[name=a,password=b]", "unknown SCRAM mechanism"),
    ("SCRAM-SHA-256=name=a", r"expected SCRAM-SHA-256=\["),
    ("SCRAM-SHA-256=[password=b]", "needs name"),
    ("SCRAM-SHA-256=[name=a]", "needs password"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=100]", "iterations"),
    ("SCRAM-SHA-256=[name=a,pass=b]", "unknown SCRAM argument keys"),
    ("SCRAM-SHA-256=[name=a,password=b,salt=c]", "not both"),
])
def test_add_scram_refusals(text, error):
    with pytest.raises(ValueError, match=error) as info:
        parse_scram_argument(text, need_name=True)
    assert "b]" not in str(info.value)
