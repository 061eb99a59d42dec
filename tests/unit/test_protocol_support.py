"""Shared helpers for the protocol tests: schema-driven sample messages,
hypothesis strategies, and a bridge to kafka-python's message classes (the
independent oracle). Also tests the helpers' own assumptions."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from raftka.client.protocol.codec import Message, MessageCodec
from raftka.client.protocol.schema import Field, parse_versions

_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
    "varint": (-(1 << 31), (1 << 31) - 1),
    "varlong": (-(1 << 63), (1 << 63) - 1),
}


def present(field: Field, version: int) -> bool:
    return version in parse_versions(field.versions)


def nullable(field: Field, version: int) -> bool:
    return version in parse_versions(field.nullable)


class _Counter:
    def __init__(self) -> None:
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n


def _scalar(type_name: str, counter: _Counter) -> Any:
    n = counter.next()
    if type_name in _INT_RANGES:
        low, high = _INT_RANGES[type_name]
        return max(low, min(high, n * 7 - 3))
    if type_name == "bool":
        return n % 2 == 0
    if type_name == "float64":
        return n + 0.5
    if type_name == "uuid":
        return uuid.UUID(int=n * 0x1234567)
    if type_name == "string":
        return f"s{n}-é"
    if type_name == "bytes":
        return bytes([n % 256]) * 3
    if type_name == "records":
        return b"RB" + bytes(range(n % 7 + 1))
    raise AssertionError(type_name)


def sample(codec: MessageCodec, version: int, sparse: bool = False, nested: bool = False) -> Message:
    """A representative message for `version`: sparse=False fills every field
    with a distinct value and arrays with two elements; sparse=True uses null
    wherever the version allows it and empty arrays elsewhere; nested=True uses
    null wherever allowed and one element per array (nullability inside arrays)."""
    counter = _Counter()

    def build(cls: type[Message], fields: tuple[Field, ...]) -> Message:
        values = {}
        for f in fields:
            if not present(f, version):
                continue
            if (sparse or nested) and nullable(f, version):
                values[f.name] = None
            elif f.is_array:
                if sparse:
                    values[f.name] = []
                else:
                    values[f.name] = [elem(f) for _ in range(1 if nested else 2)]
            elif f.is_struct:
                values[f.name] = build(codec.classes[f.type], f.fields)
            else:
                values[f.name] = _scalar(f.type, counter)
        return cls(**values)

    def elem(f: Field) -> Any:
        if f.is_struct:
            return build(codec.classes[f.element_type], f.fields)
        return _scalar(f.element_type, counter)

    return build(codec.cls, codec.schema.fields)


def strategy(codec: MessageCodec, version: int) -> st.SearchStrategy:
    """Hypothesis strategy for valid messages of `version`."""

    def scalar(type_name: str) -> st.SearchStrategy:
        if type_name in _INT_RANGES:
            return st.integers(*_INT_RANGES[type_name])
        return {
            "bool": st.booleans(),
            "float64": st.floats(allow_nan=False),
            "uuid": st.uuids(),
            "string": st.text(max_size=8),
            "bytes": st.binary(max_size=8),
            "records": st.binary(max_size=16),
        }[type_name]

    def value(f: Field, type_name: str) -> st.SearchStrategy:
        if type_name in _INT_RANGES or type_name in ("bool", "float64", "uuid", "string", "bytes", "records"):
            return scalar(type_name)
        return struct(codec.classes[type_name], f.fields)

    def struct(cls: type[Message], fields: tuple[Field, ...]) -> st.SearchStrategy:
        kwargs = {}
        for f in fields:
            if not present(f, version):
                continue
            s = (
                st.lists(value(f, f.element_type), max_size=2)
                if f.is_array
                else value(f, f.type)
            )
            if nullable(f, version):
                s = st.none() | s
            kwargs[f.name] = s
        return st.builds(cls, **kwargs)

    return struct(codec.cls, codec.schema.fields)


# --------------------------------------------------------------------------- #
# kafka-python bridge (tests only; raftka never imports kafka-python)

# kafka-python renames/retypes a few int32 "authorized operations" fields as
# bitfields (sets of bit numbers, None for INT32_MIN).
KP_RENAMES = {
    ("MetadataResponse", "topic_authorized_operations"): "authorized_operations",
    ("MetadataResponse", "cluster_authorized_operations"): "authorized_operations",
    ("DescribeClusterResponse", "cluster_authorized_operations"): "authorized_operations",
}
KP_BITFIELDS = {
    ("MetadataResponse", "topic_authorized_operations"),
    ("MetadataResponse", "cluster_authorized_operations"),
    ("DescribeGroupsResponse", "authorized_operations"),
    ("DescribeClusterResponse", "cluster_authorized_operations"),
}


def int_to_bits(value: int) -> set[int] | None:
    bits = {i for i in range(32) if (value & 0xFFFFFFFF) >> i & 1}
    return None if bits == {31} else bits


def bits_to_int(bits: set[int] | None) -> int:
    raw = sum(1 << i for i in (bits if bits is not None else {31}))
    return raw - (1 << 32) if raw & (1 << 31) else raw


def kp_class(schema_name: str):
    import kafka.protocol.admin as admin
    import kafka.protocol.consumer as consumer
    import kafka.protocol.metadata as metadata
    import kafka.protocol.producer as producer
    import kafka.protocol.sasl as sasl

    for module in (producer, consumer, metadata, admin, sasl):
        if hasattr(module, schema_name):
            return getattr(module, schema_name)
    raise LookupError(schema_name)


def to_kp(codec: MessageCodec, message: Message, version: int):
    """Build the kafka-python equivalent of one of our messages."""
    top_name = codec.schema.name
    kp_top = kp_class(top_name)

    def convert(kp_cls, obj: Message, fields: tuple[Field, ...]):
        kwargs = {}
        for f in fields:
            if not present(f, version):
                continue
            value = getattr(obj, f.name)
            kp_name = KP_RENAMES.get((top_name, f.name), f.name)
            if (top_name, f.name) in KP_BITFIELDS:
                value = int_to_bits(value)
            elif f.is_struct and value is not None:
                sub_cls = getattr(kp_cls, f.element_type)
                if f.is_array:
                    value = [convert(sub_cls, v, f.fields) for v in value]
                else:
                    value = convert(sub_cls, value, f.fields)
            elif f.element_type in ("records", "bytes") and value is not None:
                value = bytes(value)
            kwargs[kp_name] = value
        return kp_cls(version=version, **kwargs)

    return convert(kp_top, message, codec.schema.fields)


def assert_matches_kp(codec: MessageCodec, ours: Message, theirs: Any, version: int) -> None:
    """Field-by-field comparison, over the fields present in `version`."""
    top_name = codec.schema.name

    def compare(a: Any, b: Any, fields: tuple[Field, ...], path: str) -> None:
        for f in fields:
            if not present(f, version):
                continue
            mine = getattr(a, f.name)
            kp_name = KP_RENAMES.get((top_name, f.name), f.name)
            other = getattr(b, kp_name)
            where = f"{path}.{f.name}"
            if (top_name, f.name) in KP_BITFIELDS:
                assert bits_to_int(other) == mine, where
            elif f.is_struct and mine is not None:
                if f.is_array:
                    assert other is not None and len(mine) == len(other), where
                    for i, (x, y) in enumerate(zip(mine, other, strict=True)):
                        compare(x, y, f.fields, f"{where}[{i}]")
                else:
                    compare(mine, other, f.fields, where)
            elif f.element_type in ("records", "bytes") and mine is not None:
                assert other is not None and bytes(mine) == bytes(other), where
            else:
                assert mine == other, f"{where}: ours {mine!r} != kafka-python {other!r}"

    compare(ours, theirs, codec.schema.fields, top_name)


def test_sample_fills_every_present_field():
    from raftka.client.protocol.api_keys import ApiKey
    from raftka.client.protocol.messages import REQUEST_CODECS

    codec = REQUEST_CODECS[ApiKey.PRODUCE]
    msg = sample(codec, 8)
    assert msg.transactional_id is not None
    assert len(msg.topic_data) == 2 and len(msg.topic_data[0].partition_data) == 2
    sparse = sample(codec, 8, sparse=True)
    assert sparse.transactional_id is None and sparse.topic_data == []


def test_bitfield_conversion_round_trips():
    for value in (-(1 << 31), 0, 8, 0x7FFFFFFF, -2):
        assert bits_to_int(int_to_bits(value)) == value
