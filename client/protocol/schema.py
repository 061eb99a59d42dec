"""The vocabulary for declaring Kafka messages as data.

A message (one API's request or response) is a `MessageSchema`: a tuple of
`Field`s, each with the versions it exists in, the versions it may be null in,
an optional tag (flexible versions only) and, for structs and arrays of
structs, its own fields. The declarations themselves live in `schemas.py`
(generated once from Apache Kafka's message JSON by `generate_schemas.py`);
`codec.py` compiles them into encoders and decoders.

Version ranges use Kafka's own notation: ``"3+"``, ``"0-7"``, ``"5"``, ``"none"``.
"""

from __future__ import annotations

from dataclasses import dataclass

# Upper bound used for open-ended version ranges ("3+"); Kafka versions are int16.
MAX_VERSION = 0x7FFF

PRIMITIVE_TYPES = frozenset(
    {
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "uint32",
        "varint",
        "varlong",
        "float64",
        "bool",
        "uuid",
        "string",
        "bytes",
        "records",
    }
)


class _Missing:
    """Sentinel: no explicit default declared; the type's zero value applies."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of versions; empty when ``low > high``."""

    low: int
    high: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    @property
    def empty(self) -> bool:
        return self.low > self.high


def parse_versions(spec: str) -> VersionRange:
    """Parse Kafka's version notation ("0+", "3-5", "7", "none")."""
    text = spec.strip()
    try:
        if text == "none" or text == "":
            return VersionRange(1, 0)
        if text.endswith("+"):
            return VersionRange(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            low, high = text.split("-", 1)
            return VersionRange(int(low), int(high))
        return VersionRange(int(text), int(text))
    except ValueError:
        raise ValueError(
            f"version range {spec!r} is malformed; expected 'N+', 'N-M', 'N' or 'none'"
        ) from None


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message or struct.

    ``type`` is a primitive name (see PRIMITIVE_TYPES), ``"[]<elem>"`` for an
    array (of a primitive or of a struct), or a CamelCase struct name for a
    single nested struct; struct types carry their ``fields``.
    ``default`` is the value a reader of an older version sees and the value a
    constructor fills in; MISSING means the type's zero value (0, "", False,
    [], the nil UUID, or None for nullable-only bytes/records).
    """

    name: str
    type: str
    versions: str
    nullable: str = "none"
    default: object = MISSING
    tag: int | None = None
    tagged: str = "none"
    fields: tuple[Field, ...] = ()
    # Per-field override of the message's flexible versions; only the request
    # header's client_id uses it ("none": always a classic int16-length string).
    flexible: str | None = None

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        """True for a struct or an array of structs."""
        return self.element_type not in PRIMITIVE_TYPES


@dataclass(frozen=True, slots=True)
class MessageSchema:
    """One API's request or response body, declared for ``versions``."""

    name: str
    api_key: int
    kind: str  # "request" or "response"
    versions: str
    flexible: str
    fields: tuple[Field, ...]

    @property
    def version_range(self) -> VersionRange:
        return parse_versions(self.versions)

    def is_flexible(self, version: int) -> bool:
        return version in parse_versions(self.flexible)
