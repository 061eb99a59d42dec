"""Mutated request frames from a seed: pure, deterministic, replayable one frame at a time.

`Mutator(seed).frame(i)` is frame number i of the run: its own rng is seeded from
(seed, i), so a failure at frame 123456 replays alone with the same seed and index.

Mutations of a valid corpus request (tests/fuzz/corpus.py):

- flip: 1-8 random bit flips; byte: 1-4 bytes set to boundary values;
- truncate: the payload cut short (the size prefix tells the truth about it);
- append: junk after the body;
- length: one length prefix (string, bytes, array; classic or compact) lies:
  -2, -1 (null), 0, off by one, double, 0x7fff, 0x7fffffff;
- varint: one varint replaced by an overlong, unterminated or 2^64-sized one;
- int: one integer field (header included: api key, version, correlation id) set to
  a boundary value (0, -1, min, max, ±1, random);
- frame_size: the 4-byte size prefix lies (claims more or fewer bytes than sent);
- splice: the head of one request on the tail of another;
- batch: a produce request whose record batch is malformed inside (record lengths,
  varints, header counts, key/value bounds, offset and timestamp deltas, record
  count, compression) with the CRC recomputed, so it passes the CRC check;
- none: the valid request itself, which keeps state moving (groups, offsets).
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass

from raftka.client.protocol import ApiKey, encode_request
from tests.fuzz.batches import mutated_batch, uvarint, varint
from tests.fuzz.corpus import CLIENT_ID, corpus
from tests.fuzz.layout import Span, request_layout

KIND_WEIGHTS: dict[str, int] = {
    "flip": 18, "byte": 8, "truncate": 10, "append": 4, "length": 20, "varint": 8, "int": 16,
    "frame_size": 2, "splice": 4, "batch": 12, "none": 5,
}
ALL_KINDS = frozenset(KIND_WEIGHTS)
# Everything but the batch mutations (CRC-valid malformed records): what the broker must
# refuse even without record validation.
PROTOCOL_KINDS = ALL_KINDS - {"batch"}

VARIANTS = 8  # valid requests made per corpus entry (rng-made names, offsets, batches)
_INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE, 0x3F, 0x40)
_INT_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1),
}
_INT_FORMATS = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q"}


@dataclass(frozen=True)
class FuzzFrame:
    index: int
    kind: str  # the mutation applied
    detail: str  # what exactly (e.g. "len32 at 57: 12 -> -2")
    request: str  # the corpus entry it started from, e.g. "FETCH v11"
    data: bytes  # what is sent: size prefix + payload (the prefix may lie)

    def describe(self, seed: int) -> str:
        return f"frame {self.index} of seed {seed}: {self.kind} of {self.request} ({self.detail})"


class Mutator:
    def __init__(self, seed: int, kinds: frozenset[str] = ALL_KINDS) -> None:
        unknown = set(kinds) - ALL_KINDS
        if unknown or not kinds:
            raise ValueError(f"mutation kinds {sorted(unknown) or '(none)'}; expected some of {sorted(ALL_KINDS)}")
        self.seed = seed
        self.entries = corpus()
        self.produce_entries = [e for e in self.entries if e.api_key == ApiKey.PRODUCE and e.version >= 3]
        self.kinds = sorted(kinds)
        self.weights = [KIND_WEIGHTS[k] for k in self.kinds]
        self._cache: dict[tuple[int, int], tuple[bytes, list[Span]]] = {}

    def _valid(self, entry_index: int, variant: int) -> tuple[bytes, list[Span]]:
        """A valid request payload of corpus entry `entry_index` (one of VARIANTS per entry, made
        once from the seed) and its layout."""
        key = (entry_index, variant)
        cached = self._cache.get(key)
        if cached is None:
            rng = random.Random(f"{self.seed}:valid:{entry_index}:{variant}")
            payload = self.entries[entry_index].frame(rng, rng.randrange(1, 2**31 - 1))[4:]
            cached = self._cache[key] = (payload, request_layout(payload))
        return cached

    def frame(self, index: int) -> FuzzFrame:
        rng = random.Random(f"{self.seed}:{index}")
        kind = rng.choices(self.kinds, self.weights)[0]
        if kind == "batch":
            entry = rng.choice(self.produce_entries)
            what, batch = mutated_batch(rng)
            body = entry.body(rng)
            body["topic_data"][0]["partition_data"][0]["records"] = batch
            data = encode_request(entry.api_key, entry.version, rng.randrange(1, 2**31 - 1), body,
                                  client_id=CLIENT_ID)
            return FuzzFrame(index, kind, what, entry.name, data)
        entry_index = rng.randrange(len(self.entries))
        entry = self.entries[entry_index]
        payload, spans = self._valid(entry_index, rng.randrange(VARIANTS))
        if kind == "none":
            return FuzzFrame(index, kind, "valid", entry.name, _framed(payload))
        if kind == "splice":
            other, _ = self._valid(rng.randrange(len(self.entries)), rng.randrange(VARIANTS))
            cut_a, cut_b = rng.randrange(len(payload) + 1), rng.randrange(len(other) + 1)
            return FuzzFrame(index, kind, f"{cut_a} bytes + tail from {cut_b}", entry.name,
                             _framed(payload[:cut_a] + other[cut_b:]))
        if kind == "frame_size":
            claimed = max(0, len(payload) + rng.choice((-1, 1, -len(payload) // 2, 1000, 2**20)))
            return FuzzFrame(index, kind, f"prefix {claimed} for {len(payload)} bytes", entry.name,
                             struct.pack(">i", claimed) + payload)
        mutated, detail = _MUTATIONS[kind](rng, bytearray(payload), spans)
        return FuzzFrame(index, kind, detail, entry.name, _framed(bytes(mutated)))


def _framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _flip(rng: random.Random, buf: bytearray, spans: list[Span] = ()) -> tuple[bytearray, str]:
    bits = [rng.randrange(len(buf) * 8) for _ in range(rng.randint(1, 8))]
    for bit in bits:
        buf[bit // 8] ^= 1 << (bit % 8)
    return buf, f"bits {bits}"


def _byte(rng: random.Random, buf: bytearray, spans: list[Span] = ()) -> tuple[bytearray, str]:
    changes = []
    for _ in range(rng.randint(1, 4)):
        pos = rng.randrange(len(buf))
        buf[pos] = rng.choice(_INTERESTING_BYTES)
        changes.append((pos, buf[pos]))
    return buf, f"bytes {changes}"


def _truncate(rng: random.Random, buf: bytearray, spans: list[Span] = ()) -> tuple[bytearray, str]:
    cut = rng.randrange(len(buf))
    return buf[:cut], f"cut at {cut} of {len(buf)}"


def _append(rng: random.Random, buf: bytearray, spans: list[Span] = ()) -> tuple[bytearray, str]:
    extra = rng.randbytes(rng.randint(1, 64))
    return buf + extra, f"{len(extra)} bytes appended"


def _spans(spans: list[Span], kinds: tuple[str, ...]) -> list[Span]:
    return [s for s in spans if s.kind in kinds]


def _replace(buf: bytearray, span: Span, new: bytes) -> bytearray:
    return buf[:span.offset] + new + buf[span.offset + span.width:]


def _length(rng: random.Random, buf: bytearray, layout: list[Span]) -> tuple[bytearray, str]:
    spans = _spans(layout, ("len16", "len32", "ulen"))
    if not spans:
        return _flip(rng, buf)
    span = rng.choice(spans)
    v = span.value
    if span.kind == "len16":
        lie = rng.choice((-2, -1, 0, v + 1, v - 1, 2 * v + 7, 2**15 - 1, -(2**15)))
        new = struct.pack(">h", max(-(2**15), min(2**15 - 1, lie)))
    elif span.kind == "len32":
        lie = rng.choice((-2, -1, 0, v + 1, v - 1, 2 * v + 7, 2**31 - 1, -(2**31), 2**20))
        new = struct.pack(">i", max(-(2**31), min(2**31 - 1, lie)))
    else:
        lie = rng.choice((-1, 0, v + 1, v - 1, 2 * v + 7, 2**31 - 2, 2**32, 2**35))
        new = uvarint(max(lie + 1, 0))
    return _replace(buf, span, new), f"{span.kind} at {span.offset}: {v} -> {lie}"


def _varint(rng: random.Random, buf: bytearray, layout: list[Span]) -> tuple[bytearray, str]:
    spans = _spans(layout, ("ulen", "varint", "varlong", "uvarint"))
    if not spans:
        return _length(rng, buf, layout)
    span = rng.choice(spans)
    new = rng.choice((b"\xff" * 6, b"\xff" * 11 + b"\x01", b"\x80" * 5 + b"\x00", b"\xff" * 4 + b"\x7f",
                      uvarint(2**64), varint(-(2**63)), b"\xff"))
    return _replace(buf, span, new), f"{span.kind} at {span.offset} -> {new.hex()}"


def _int(rng: random.Random, buf: bytearray, layout: list[Span]) -> tuple[bytearray, str]:
    spans = _spans(layout, tuple(_INT_FORMATS))
    span = rng.choice(spans)
    low, high = _INT_BOUNDS[span.kind]
    value = rng.choice((0, -1, 1, low, high, span.value + 1, span.value - 1, rng.randint(low, high)))
    value = max(low, min(high, value))
    return _replace(buf, span, struct.pack(_INT_FORMATS[span.kind], value)), \
        f"{span.kind} at {span.offset}: {span.value} -> {value}"


_MUTATIONS = {"flip": _flip, "byte": _byte, "truncate": _truncate, "append": _append,
              "length": _length, "varint": _varint, "int": _int}

