"""Client quotas in the metadata log: the record, apply, snapshot, and the pure decisions of
raft_meta/controller/quota_decisions.py (AlterClientQuotas validation, DescribeClientQuotas matching, the
KIP-55 lookup order), as tables."""

from __future__ import annotations

import pytest

from raftka.raft_meta.controller.quota_decisions import (
    DescribeError,
    QuotaAlteration,
    alter_client_quotas,
    describe_client_quotas,
    quota_for,
)
from raftka.raft_meta.metadata.apply import apply_entry, replay
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.metadata.records import ClientQuota, decode_record, encode_record
from raftka.raft_meta.metadata.snapshot import decode_snapshot, encode_snapshot, image_digest

ALICE = (("user", "alice"),)
ALICE_P1 = (("client-id", "p1"), ("user", "alice"))
DEFAULT_USER = (("user", None),)
P1 = (("client-id", "p1"),)
DEFAULT_CLIENT = (("client-id", None),)


def test_record_round_trips_with_a_default_entity():
    for record in (ClientQuota(ALICE_P1, "producer_byte_rate", 1024.0),
                   ClientQuota(DEFAULT_USER, "consumer_byte_rate", None)):
        assert decode_record(encode_record(record)) == record


APPLY_CASES = [
    ([ClientQuota(ALICE, "producer_byte_rate", 100.0)], {ALICE: {"producer_byte_rate": 100.0}}, None),
    ([ClientQuota(ALICE, "producer_byte_rate", 100.0), ClientQuota(ALICE, "producer_byte_rate", None)], {}, None),
    ([ClientQuota(ALICE, "producer_byte_rate", None)], {}, "no client quota producer_byte_rate"),
    ([ClientQuota(ALICE, "bad_key", 1.0)], {}, "Invalid configuration key bad_key"),
    ([ClientQuota((("group", "g"),), "producer_byte_rate", 1.0)], {}, "Unhandled client quota entity type: group"),
    ([ClientQuota((("ip", "10.0.0.1"),), "connection_creation_rate", 5.0)],
     {(("ip", "10.0.0.1"),): {"connection_creation_rate": 5.0}}, None),
    ([ClientQuota((("ip", "10.0.0.1"),), "producer_byte_rate", 5.0)], {}, "Invalid configuration key"),
]


@pytest.mark.parametrize(("records", "quotas", "rejection"), APPLY_CASES)
def test_apply(records, quotas, rejection):
    image = MetadataImage()
    reasons = []
    for offset, record in enumerate(records, start=1):
        image, deltas = apply_entry(image, record, offset)
        reasons += [d.reason for d in deltas if not d.accepted]
        assert all(d.client_quotas for d in deltas if d.accepted)
    assert image.client_quotas == quotas
    if rejection:
        assert any(rejection in r for r in reasons), reasons
    else:
        assert not reasons


def test_snapshot_keeps_quotas_and_the_digest_sees_them():
    image = replay([(1, ClientQuota(ALICE, "producer_byte_rate", 100.0)),
                    (2, ClientQuota(DEFAULT_CLIENT, "consumer_byte_rate", 5.0))])
    loaded = decode_snapshot(encode_snapshot(image))
    assert loaded.client_quotas == image.client_quotas
    assert image_digest(loaded) == image_digest(image) != image_digest(MetadataImage(offset=2))


def _alter(quotas, *entries):
    return alter_client_quotas(quotas, [QuotaAlteration(tuple(c), tuple(o)) for c, o in entries])


ALTER_CASES = [
    # components, ops, (error, message fragment) or None
    ([("user", "alice")], [("producer_byte_rate", 1024)], None),
    ([("user", None), ("client-id", None)], [("consumer_byte_rate", 10)], None),
    ([("ip", "127.0.0.1")], [("connection_creation_rate", 3)], None),
    ([("ip", None)], [("connection_creation_rate", 3)], None),
    ([], [("producer_byte_rate", 1)], "Invalid empty client quota entity"),
    ([("user", "a"), ("user", "b")], [("producer_byte_rate", 1)], "Invalid client quota entity, duplicate entity entry user"),
    ([("group", "g")], [("producer_byte_rate", 1)], "Unhandled client quota entity type: group"),
    ([("user", "")], [("producer_byte_rate", 1)], "Empty user not supported"),
    ([("ip", "1.2.3.4"), ("user", "a")], [("connection_creation_rate", 1)],
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ([("ip", "not-an-ip")], [("connection_creation_rate", 1)], "not-an-ip is not a valid IP"),
    ([("user", "a")], [("bad_key", 1)], "Invalid configuration key bad_key"),
    ([("user", "a")], [("connection_creation_rate", 1)], "Invalid configuration key connection_creation_rate"),
    ([("ip", "1.2.3.4")], [("producer_byte_rate", 1)], "Invalid configuration key producer_byte_rate"),
    ([("user", "a")], [("producer_byte_rate", 1.5)], "producer_byte_rate cannot be a fractional value."),
    ([("user", "a")], [("request_percentage", 12.5)], None),
    ([("ip", "1.2.3.4")], [("connection_creation_rate", -1)], "Quota connection_creation_rate must be greater than 0"),
    ([("user", "a")], [("consumer_byte_rate", 0)], "Quota consumer_byte_rate must be greater than 0"),
    ([("user", "a")], [("request_percentage", float("nan"))], "Quota request_percentage must be a finite number"),
    ([("ip", "1.2.3.4")], [("connection_creation_rate", 2.0**31)],
     "Proposed value for connection_creation_rate is too large for an INT."),
    ([("user", "a")], [("producer_byte_rate", 1e19)], "Proposed value for producer_byte_rate is too large for a LONG."),
    ([("user", "a")], [("producer_byte_rate", 1), ("producer_byte_rate", 2)], "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})"),
]


@pytest.mark.parametrize(("components", "ops", "problem"), ALTER_CASES)
def test_alter_validation(components, ops, problem):
    records, results = _alter({}, (components, ops))
    assert len(results) == 1
    if problem is None:
        assert results[0].error is None and len(records) == len(ops)
    else:
        assert results[0].error == "INVALID_REQUEST" and problem in results[0].message, results[0]
        assert records == []


def test_alter_writes_only_changes_and_refuses_a_duplicate_entity():
    quotas = {ALICE: {"producer_byte_rate": 100.0}}
    records, results = _alter(quotas, ([("user", "alice")], [("producer_byte_rate", 100), ("consumer_byte_rate", None)]))
    assert records == [] and results[0].error is None
    records, results = _alter(quotas, ([("user", "alice")], [("producer_byte_rate", None)]),
                              ([("user", "alice")], [("consumer_byte_rate", 1)]))
    assert records == [ClientQuota(ALICE, "producer_byte_rate", None)]
    assert results[1].error == "INVALID_REQUEST" and "Ignoring duplicate entity" in results[1].message


IMAGE_QUOTAS = {
    ALICE: {"producer_byte_rate": 1.0},
    ALICE_P1: {"producer_byte_rate": 2.0},
    DEFAULT_USER: {"producer_byte_rate": 3.0},
    P1: {"consumer_byte_rate": 4.0},
    (("client-id", None), ("user", None)): {"producer_byte_rate": 5.0},
    (("ip", "1.2.3.4"),): {"connection_creation_rate": 6.0},
}

DESCRIBE_CASES = [
    # components (type, match type, match), strict, expected entities
    ([("user", 0, "alice")], False, {ALICE, ALICE_P1}),
    ([("user", 0, "alice")], True, {ALICE}),
    ([("user", 1, None)], False, {DEFAULT_USER, (("client-id", None), ("user", None))}),
    ([("user", 1, None)], True, {DEFAULT_USER}),
    ([("user", 2, None)], True, {ALICE, DEFAULT_USER}),
    ([("user", 2, None), ("client-id", 2, None)], True, {ALICE_P1, (("client-id", None), ("user", None))}),
    ([("client-id", 0, "p1")], False, {ALICE_P1, P1}),
    ([("client-id", 0, "p1"), ("user", 2, None)], False, {ALICE_P1}),
    ([], False, set(IMAGE_QUOTAS)),
    ([], True, set()),
    ([("ip", 2, None)], False, {(("ip", "1.2.3.4"),)}),
]


@pytest.mark.parametrize(("components", "strict", "expected"), DESCRIBE_CASES)
def test_describe_matching(components, strict, expected):
    found = describe_client_quotas(IMAGE_QUOTAS, components, strict)
    assert {entity for entity, _ in found} == expected
    assert all(values == IMAGE_QUOTAS[entity] for entity, values in found)


DESCRIBE_ERRORS = [
    ([("", 0, "x")], "INVALID_REQUEST", "Invalid empty entity type"),
    ([("user", 0, "a"), ("user", 2, None)], "INVALID_REQUEST", "cannot appear more than once"),
    ([("group", 0, "g")], "UNSUPPORTED_VERSION", "Unsupported entity type group"),
    ([("user", 0, None)], "INVALID_REQUEST", "MATCH_TYPE_EXACT, but set match string to null"),
    ([("user", 1, "a")], "INVALID_REQUEST", "MATCH_TYPE_DEFAULT, but also specified a match string"),
    ([("user", 2, "a")], "INVALID_REQUEST", "MATCH_TYPE_SPECIFIED, but also specified a match string"),
    ([("user", 7, None)], "INVALID_REQUEST", "Unknown match type 7"),
    ([("ip", 2, None), ("user", 2, None)], "INVALID_REQUEST", "IP filter component should not be used"),
]


@pytest.mark.parametrize(("components", "error", "message"), DESCRIBE_ERRORS)
def test_describe_refusals(components, error, message):
    with pytest.raises(DescribeError) as caught:
        describe_client_quotas(IMAGE_QUOTAS, components, False)
    assert caught.value.error == error and message in str(caught.value)


LOOKUP_CASES = [
    # quotas present, user, client id -> (value, tags)
    ({ALICE_P1: 1, ALICE: 2, P1: 3}, "alice", "p1", (1, ("alice", "p1"))),
    ({(("client-id", None), ("user", "alice")): 1, ALICE: 2}, "alice", "p9", (1, ("alice", "p9"))),
    ({ALICE: 2, (("client-id", "p1"), ("user", None)): 3}, "alice", "p1", (2, ("alice", ""))),
    ({(("client-id", "p1"), ("user", None)): 3, DEFAULT_USER: 4}, "bob", "p1", (3, ("bob", "p1"))),
    ({(("client-id", None), ("user", None)): 5, DEFAULT_USER: 4}, "bob", "p1", (5, ("bob", "p1"))),
    ({DEFAULT_USER: 4, P1: 6}, "bob", "p1", (4, ("bob", ""))),
    ({P1: 6, DEFAULT_CLIENT: 7}, "bob", "p1", (6, ("", "p1"))),
    ({DEFAULT_CLIENT: 7}, "bob", "p2", (7, ("", "p2"))),
    ({ALICE: 2}, "bob", "p1", (None, ("", "p1"))),
]


@pytest.mark.parametrize(("quotas", "user", "client_id", "expected"), LOOKUP_CASES)
def test_lookup_order_is_kip_55(quotas, user, client_id, expected):
    image_quotas = {entity: {"producer_byte_rate": float(v)} for entity, v in quotas.items()}
    assert quota_for(image_quotas, user, client_id, "producer_byte_rate") == expected
    assert quota_for(image_quotas, user, client_id, "consumer_byte_rate")[0] is None


WIRE_CASES = [
    ("request", 48, {"components": [{"entity_type": "user", "match_type": 1, "match": None}], "strict": True}),
    ("request", 49, {"entries": [{"entity": [{"entity_type": "user", "entity_name": None}],
                                  "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}],
                     "validate_only": False}),
    ("response", 48, {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": [
        {"entity": [{"entity_type": "client-id", "entity_name": "p1"}],
         "values": [{"key": "request_percentage", "value": 12.5}]}]}),
    ("response", 49, {"throttle_time_ms": 7, "entries": [
        {"error_code": 42, "error_message": "Invalid configuration key bad_key",
         "entity": [{"entity_type": "ip", "entity_name": None}]}]}),
]


@pytest.mark.parametrize("version", [0, 1])  # v1 is flexible (compact strings, tagged fields)
@pytest.mark.parametrize(("kind", "key", "body"), WIRE_CASES)
def test_wire_round_trip(kind, key, body, version):
    from raftka.client.protocol import (
        decode_request,
        decode_response,
        encode_request,
        encode_response,
        request_class,
        response_class,
    )

    if kind == "request":
        frame = encode_request(key, version, 9, request_class(key)(**body), client_id="t")
        _, decoded = decode_request(memoryview(frame)[4:])
    else:
        frame = encode_response(9, key, version, response_class(key)(**body))
        _, decoded = decode_response(key, version, memoryview(frame)[4:])
    again = encode_request(key, version, 9, decoded, client_id="t") if kind == "request" \
        else encode_response(9, key, version, decoded)
    assert again == frame


def test_control_rpc_carries_alterations_and_results():
    from raftka.broker.net.control_rpc import METHODS, _wire_args, check_arguments
    from raftka.raft_meta.controller.quota_decisions import QuotaResult

    alterations = [QuotaAlteration((("user", None), ("client-id", "p1")), (("producer_byte_rate", 5.0),
                                                                           ("consumer_byte_rate", None)))]
    wire = {"alterations": [[[list(c) for c in a.components], [list(op) for op in a.ops]] for a in alterations],
            "validate_only": True}
    assert check_arguments("alter_client_quotas", wire) is None
    assert _wire_args("alter_client_quotas", wire) == {"alterations": alterations, "validate_only": True}
    result = QuotaResult((("user", None),), "INVALID_REQUEST", "Invalid configuration key x")
    assert METHODS["alter_client_quotas"]([result]) == [
        [[["user", None]], "INVALID_REQUEST", "Invalid configuration key x"]]
