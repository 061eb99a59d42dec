"""The generic walker: compile a MessageSchema into classes, a decoder and an encoder.

`MessageCodec(schema)` builds one Python class per struct in the schema (the
message itself plus every nested struct, all attached to the message class:
``ProduceResponse.PartitionProduceResponse``). Per version it compiles, once
and lazily, a flat plan for each struct: runs of consecutive fixed-width
fields become a single precompiled `struct.Struct`, every other field a
reader/writer closure. Decoding walks a memoryview of the frame; `records`
fields come back as zero-copy memoryview slices of it.

Hostile input: every length prefix is checked against the bytes that remain
before anything is allocated, varints are bounded, and every failure is a
ProtocolError subclass (see exceptions.py).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar, cast

from raftka.client.protocol.exceptions import EncodeError, MalformedMessage, TruncatedMessage
from raftka.client.protocol.schema import MISSING, Field, MessageSchema, parse_versions

Buffer = bytes | bytearray | memoryview
Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[[Any, list[Any]], None]

_FIXED_FORMATS = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "float64": "d",
    "bool": "?",
}
_ZERO_VALUES: dict[str, object] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "uint32": 0,
    "varint": 0,
    "varlong": 0,
    "float64": 0.0,
    "bool": False,
    "uuid": uuid.UUID(int=0),
    "string": "",
    "bytes": b"",
    "records": None,
}
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_NULL_INT16 = b"\xff\xff"
_NULL_INT32 = b"\xff\xff\xff\xff"


# --------------------------------------------------------------------------- #
# Message objects


class Message:
    """Base of every message and nested struct class built from a schema.

    Construct with keyword arguments; fields left out take their declared
    default (lists are fresh). Every field of every version exists as an
    attribute; the version only decides which ones go on the wire. Nested
    structs may also be given as plain dicts when encoding.
    """

    __slots__ = ("_unknown_tags",)
    # (name, default, factory): factory is a callable producing a fresh default
    _defaults: ClassVar[tuple[tuple[str, object, Callable[[], object] | None], ...]] = ()
    _field_names: ClassVar[frozenset[str]] = frozenset()
    # name -> (struct class, is_array) for fields holding nested structs
    _struct_fields: ClassVar[dict[str, tuple[type[Message], bool]]] = {}

    _unknown_tags: dict[int, bytes]  # tagged fields this version does not know, kept as read

    if TYPE_CHECKING:
        # The fields are built from the schema at import time: to a type checker, any one.
        def __getattr__(self, name: str) -> Any: ...

        def __setattr__(self, name: str, value: Any) -> None: ...

    def __init__(self, **values: Any) -> None:
        for name, default, factory in self._defaults:
            if name in values:
                value = values.pop(name)
                nested = self._struct_fields.get(name)
                if nested is not None and value is not None:
                    value = _from_dicts(nested, value)
                setattr(self, name, value)
            elif factory is not None:
                setattr(self, name, factory())
            else:
                setattr(self, name, default)
        if values:
            raise TypeError(
                f"{type(self).__name__} has no field(s) {sorted(values)}; "
                f"expected some of {[d[0] for d in self._defaults]}"
            )

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n, _, _ in self._defaults)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n, _, _ in self._defaults)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dicts and lists (records stay bytes-like)."""
        return {n: _plain(getattr(self, n)) for n, _, _ in self._defaults}


def _from_dicts(nested: tuple[type[Message], bool], value: Any) -> Any:
    """Let callers write nested structs as dicts: {"name": ...} -> Struct(name=...)."""
    cls, is_array = nested
    if is_array:
        if any(type(v) is dict for v in value):
            return [cls(**v) if type(v) is dict else v for v in value]
        return value
    return cls(**value) if type(value) is dict else value


def _plain(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _field_default(field: Field, classes: dict[str, type[Message]]) -> tuple[object, Callable[[], object] | None]:
    """(default, factory) for a field, following Kafka's default rules."""
    if field.default is not MISSING:
        return field.default, None
    if field.is_array:
        return None, list
    if field.is_struct:
        return None, classes[field.type]
    return _ZERO_VALUES[field.type], None


def _build_classes(schema: MessageSchema) -> dict[str, type[Message]]:
    """One class per struct, keyed by Kafka's struct type name (message: its name)."""
    classes: dict[str, type[Message]] = {}
    shapes: dict[str, tuple[Field, ...]] = {}

    def build(name: str, fields: tuple[Field, ...]) -> type[Message]:
        for field in fields:
            if field.is_struct:
                if field.element_type in classes:
                    # Kafka's "commonStructs" are used by several fields: one class, if identical.
                    if shapes[field.element_type] != field.fields:
                        raise ValueError(
                            f"{schema.name}: struct name {field.element_type!r} declared twice with "
                            "different fields; expected unique struct names within a message"
                        )
                    continue
                shapes[field.element_type] = field.fields
                build(field.element_type, field.fields)
        cls = cast("type[Message]", type(
            name,
            (Message,),
            {
                "__slots__": tuple(f.name for f in fields),
                "__module__": __name__,
                "__qualname__": name if name == schema.name else f"{schema.name}.{name}",
            },
        ))
        cls._defaults = tuple(
            (f.name, *_field_default(f, classes))
            for f in fields
        )
        cls._field_names = frozenset(f.name for f in fields)
        cls._struct_fields = {
            f.name: (classes[f.element_type], f.is_array) for f in fields if f.is_struct
        }
        classes[name] = cls
        return cls

    top = build(schema.name, schema.fields)
    for name, cls in classes.items():
        if cls is not top:
            setattr(top, name, cls)
    return classes


# --------------------------------------------------------------------------- #
# Primitive readers (buf is a memoryview; positions are ints)


def _truncated(what: str, need: int, pos: int, buf: memoryview) -> TruncatedMessage:
    return TruncatedMessage(
        f"{what} needs {need} byte(s) at offset {pos} but only {len(buf) - pos} remain"
    )


def read_uvarint(buf: memoryview, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Unsigned LEB128 varint as used for compact lengths and tags."""
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise _truncated("unsigned varint", 1, pos, buf)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise MalformedMessage(f"unsigned varint at offset {pos} is longer than {max_bytes} bytes")


def write_uvarint(value: int) -> bytes:
    if value < 0:
        raise EncodeError(f"unsigned varint cannot hold {value}; expected >= 0")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_signed_varint(max_bytes: int) -> Reader:
    def read(buf: memoryview, pos: int) -> tuple[int, int]:
        raw, pos = read_uvarint(buf, pos, max_bytes)
        return (raw >> 1) ^ -(raw & 1), pos

    return read


def _write_signed_varint(bits: int) -> Writer:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def write(value: int, out: list[Any]) -> None:
        if not low <= value <= high:
            raise EncodeError(f"value {value} out of range for a {bits}-bit varint")
        out.append(write_uvarint((value << 1) ^ (value >> (bits - 1))))

    return write


def _length_reader(compact: bool, wide: bool) -> Reader:
    """Length prefix reader returning -1 for null. wide: int32 (bytes/arrays) vs int16."""
    if compact:

        def read_compact(buf: memoryview, pos: int) -> tuple[int, int]:
            raw, pos = read_uvarint(buf, pos)
            return raw - 1, pos

        return read_compact
    fmt = _INT32 if wide else _INT16
    size = fmt.size

    def read_classic(buf: memoryview, pos: int) -> tuple[int, int]:
        if pos + size > len(buf):
            raise _truncated("length prefix", size, pos, buf)
        return fmt.unpack_from(buf, pos)[0], pos + size

    return read_classic


def _length_writer(compact: bool, wide: bool) -> Callable[[int], bytes]:
    if compact:
        return lambda n: write_uvarint(n + 1)
    fmt = _INT32 if wide else _INT16
    return fmt.pack


def _null_error(name: str, version: int) -> MalformedMessage:
    return MalformedMessage(f"field {name!r} is null but is not nullable in version {version}")


def _string_reader(name: str, compact: bool, nullable: bool, version: int) -> Reader:
    read_len = _length_reader(compact, wide=False)

    def read(buf: memoryview, pos: int) -> tuple[str | None, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            if n == -1:
                raise _null_error(name, version)
            raise MalformedMessage(f"string {name!r} has negative length {n}")
        end = pos + n
        if end > len(buf):
            raise _truncated(f"string {name!r}", n, pos, buf)
        try:
            return str(buf[pos:end], "utf-8"), end
        except UnicodeDecodeError as exc:
            raise MalformedMessage(f"string {name!r} at offset {pos} is not UTF-8: {exc}") from None

    return read


def _bytes_reader(name: str, compact: bool, nullable: bool, version: int, zero_copy: bool) -> Reader:
    read_len = _length_reader(compact, wide=True)

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            if n == -1:
                raise _null_error(name, version)
            raise MalformedMessage(f"bytes {name!r} has negative length {n}")
        end = pos + n
        if end > len(buf):
            raise _truncated(f"bytes {name!r}", n, pos, buf)
        return (buf[pos:end] if zero_copy else bytes(buf[pos:end])), end

    return read


def _read_uuid(buf: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise _truncated("uuid", 16, pos, buf)
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def _fixed_reader(type_name: str) -> Reader:
    fmt = struct.Struct(">" + _FIXED_FORMATS[type_name])
    size = fmt.size
    unpack = fmt.unpack_from

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        if pos + size > len(buf):
            raise _truncated(type_name, size, pos, buf)
        return unpack(buf, pos)[0], pos + size

    return read


def _min_size(field: Field, version: int, compact: bool) -> int:
    """Fewest bytes one encoded value of `field`'s element type can take."""
    elem = field.element_type
    if elem in _FIXED_FORMATS:
        return struct.calcsize(">" + _FIXED_FORMATS[elem])
    if elem == "uuid":
        return 16
    if elem in ("varint", "varlong"):
        return 1
    if elem == "string":
        return 1 if compact else 2
    if elem in ("bytes", "records"):
        return 1 if compact else 4
    total = 1 if compact else 0  # the tagged-field count
    for sub in field.fields:
        if version in parse_versions(sub.versions) and not _is_tagged(sub, version):
            if sub.is_array:
                total += 1 if compact else 4
            else:
                total += _min_size(sub, version, compact)
    return total


def _is_tagged(field: Field, version: int) -> bool:
    return field.tag is not None and version in parse_versions(field.tagged)


# --------------------------------------------------------------------------- #
# Compilation


class _Compiler:
    """Compiles readers and writers for one (schema, version)."""

    def __init__(self, schema: MessageSchema, classes: dict[str, type[Message]], version: int):
        self.schema = schema
        self.classes = classes
        self.version = version
        self.flexible = schema.is_flexible(version)

    def _compact(self, field: Field) -> bool:
        if field.flexible is not None:
            return self.version in parse_versions(field.flexible)
        return self.flexible

    def _nullable(self, field: Field) -> bool:
        return self.version in parse_versions(field.nullable)

    # ---- decoding

    def value_reader(self, field: Field, elem_type: str) -> Reader:
        v = self.version
        compact = self._compact(field)
        nullable = self._nullable(field)
        if elem_type in _FIXED_FORMATS:
            return _fixed_reader(elem_type)
        if elem_type == "string":
            return _string_reader(field.name, compact, nullable, v)
        if elem_type == "bytes":
            return _bytes_reader(field.name, compact, nullable, v, zero_copy=False)
        if elem_type == "records":
            return _bytes_reader(field.name, compact, nullable, v, zero_copy=True)
        if elem_type == "uuid":
            return _read_uuid
        if elem_type == "varint":
            return _read_signed_varint(5)
        if elem_type == "varlong":
            return _read_signed_varint(10)
        return self.struct_reader(self.classes[elem_type], field.fields)

    def field_reader(self, field: Field) -> Reader:
        if not field.is_array:
            if field.is_struct and self._nullable(field):
                inner = self.value_reader(field, field.type)

                def read_nullable_struct(buf: memoryview, pos: int) -> tuple[Any, int]:
                    if pos >= len(buf):
                        raise _truncated(f"struct {field.name!r} marker", 1, pos, buf)
                    if buf[pos] & 0x80:  # Kafka writes int8 -1 for null, 1 for present
                        return None, pos + 1
                    return inner(buf, pos + 1)

                return read_nullable_struct
            return self.value_reader(field, field.type)
        return self.array_reader(field)

    def array_reader(self, field: Field) -> Reader:
        name, version = field.name, self.version
        compact = self._compact(field)
        nullable = self._nullable(field)
        read_len = _length_reader(compact, wide=True)
        min_size = max(1, _min_size(field, version, compact))
        elem = field.element_type
        fixed = _FIXED_FORMATS.get(elem)

        def check(buf: memoryview, pos: int) -> tuple[int | None, int]:
            n, pos = read_len(buf, pos)
            if n < 0:
                if n == -1 and nullable:
                    return None, pos
                if n == -1:
                    raise _null_error(name, version)
                raise MalformedMessage(f"array {name!r} has negative length {n}")
            if n * min_size > len(buf) - pos:
                raise TruncatedMessage(
                    f"array {name!r} declares {n} element(s) of >= {min_size} byte(s) at "
                    f"offset {pos} but only {len(buf) - pos} byte(s) remain"
                )
            return n, pos

        if fixed is not None:
            size = min_size

            def read_fixed_array(buf: memoryview, pos: int) -> tuple[list[Any] | None, int]:
                n, pos = check(buf, pos)
                if n is None:
                    return None, pos
                return list(struct.unpack_from(f">{n}{fixed}", buf, pos)), pos + n * size

            return read_fixed_array

        read_elem = self.value_reader(field, elem)

        def read_array(buf: memoryview, pos: int) -> tuple[list[Any] | None, int]:
            n, pos = check(buf, pos)
            if n is None:
                return None, pos
            out: list[Any] = []
            append = out.append
            for _ in range(n):
                value, pos = read_elem(buf, pos)
                append(value)
            return out, pos

        return read_array

    def _fixed_runs(self, fields: list[Field]) -> list[tuple[tuple[str, ...], struct.Struct | None, Any]]:
        """Group consecutive fixed-width fields: [(names, Struct, None) | (name, None, reader)]."""
        plan: list[tuple[Any, Any, Any]] = []
        run: list[Field] = []

        def flush() -> None:
            if run:
                fmt = ">" + "".join(_FIXED_FORMATS[f.type] for f in run)
                plan.append((tuple(f.name for f in run), struct.Struct(fmt), None))
                run.clear()

        for f in fields:
            if f.type in _FIXED_FORMATS:
                run.append(f)
            else:
                flush()
                plan.append(((f.name,), None, f))
        flush()
        return plan

    def _split(self, fields: tuple[Field, ...]) -> tuple[list[Field], list[Field], list[Field]]:
        """(fields on the wire in order, tagged fields, fields absent in this version)."""
        present, tagged, absent = [], [], []
        for f in fields:
            if self.version not in parse_versions(f.versions):
                absent.append(f)
            elif _is_tagged(f, self.version) and self.flexible:
                tagged.append(f)
            else:
                present.append(f)
        return present, tagged, absent

    def struct_reader(self, cls: type[Message], fields: tuple[Field, ...]) -> Reader:
        present, tagged, absent = self._split(fields)
        # (names, Struct, None) | (names, None, Reader)
        plan: list[tuple[tuple[str, ...], struct.Struct | None, Any]] = [
            (names, fmt, None if fmt else self.field_reader(f))
            for names, fmt, f in self._fixed_runs(present)
        ]
        # Fields not read from the wire take their defaults (tagged ones may be
        # overwritten when present).
        defaults = [d for d in cls._defaults if d[0] in {f.name for f in absent + tagged}]
        tag_readers = {f.tag: (f.name, self.field_reader(f)) for f in tagged if f.tag is not None}
        flexible = self.flexible
        new = object.__new__
        cls_name = cls.__name__

        def read_struct(buf: memoryview, pos: int) -> tuple[Message, int]:
            obj = new(cls)
            for names, fmt, read in plan:
                if fmt is not None:
                    if pos + fmt.size > len(buf):
                        raise _truncated(f"{cls_name} fields {names}", fmt.size, pos, buf)
                    for name, value in zip(names, fmt.unpack_from(buf, pos), strict=True):
                        setattr(obj, name, value)
                    pos += fmt.size
                else:
                    value, pos = read(buf, pos)
                    setattr(obj, names[0], value)
            for name, default, factory in defaults:
                setattr(obj, name, factory() if factory is not None else default)
            if flexible:
                pos = _read_tagged_fields(obj, buf, pos, tag_readers, cls_name)
            return obj, pos

        return read_struct

    # ---- encoding

    def value_writer(self, field: Field, elem_type: str, path: tuple[str, ...]) -> Writer:
        compact = self._compact(field)
        nullable = self._nullable(field)
        name = field.name
        if elem_type in _FIXED_FORMATS:
            pack = struct.Struct(">" + _FIXED_FORMATS[elem_type]).pack

            def write_fixed(value: Any, out: list[Any]) -> None:
                out.append(pack(value))

            return write_fixed
        if elem_type in ("string", "bytes", "records"):
            is_string = elem_type == "string"
            write_len = _length_writer(compact, wide=not is_string)
            null = write_uvarint(0) if compact else (_NULL_INT16 if is_string else _NULL_INT32)
            limit = 0x7FFF if is_string and not compact else 0x7FFFFFFF

            def write_blob(value: Any, out: list[Any]) -> None:
                if value is None:
                    if not nullable:
                        raise EncodeError(f"{name!r} is None but not nullable in v{self.version}")
                    out.append(null)
                    return
                data = value.encode("utf-8") if is_string else value
                if type(data) is memoryview and data.format != "B":
                    data = data.cast("B")  # so len() counts bytes when framing
                n = len(data)
                if n > limit:
                    raise EncodeError(f"{name!r} is {n} bytes; expected at most {limit}")
                out.append(write_len(n))
                out.append(data)

            return write_blob
        if elem_type == "uuid":

            def write_uuid(value: uuid.UUID, out: list[Any]) -> None:
                out.append(value.bytes)

            return write_uuid
        if elem_type == "varint":
            return _write_signed_varint(32)
        if elem_type == "varlong":
            return _write_signed_varint(64)
        return self.struct_writer(self.classes[elem_type], field.fields, path)

    def field_writer(self, field: Field, path: tuple[str, ...]) -> Writer:
        if not field.is_array:
            inner = self.value_writer(field, field.type, path)
            if field.is_struct and self._nullable(field):

                def write_nullable_struct(value: Any, out: list[Any]) -> None:
                    if value is None:
                        out.append(b"\xff")
                    else:
                        out.append(b"\x01")
                        inner(value, out)

                return write_nullable_struct
            return inner
        compact = self._compact(field)
        nullable = self._nullable(field)
        write_len = _length_writer(compact, wide=True)
        null = write_uvarint(0) if compact else _NULL_INT32
        name, version = field.name, self.version
        fixed = _FIXED_FORMATS.get(field.element_type)
        if fixed is not None:

            def write_fixed_array(value: Any, out: list[Any]) -> None:
                if value is None:
                    if not nullable:
                        raise EncodeError(f"{name!r} is None but not nullable in v{version}")
                    out.append(null)
                    return
                out.append(write_len(len(value)))
                out.append(struct.pack(f">{len(value)}{fixed}", *value))

            return write_fixed_array
        write_elem = self.value_writer(field, field.element_type, path)

        def write_array(value: Any, out: list[Any]) -> None:
            if value is None:
                if not nullable:
                    raise EncodeError(f"{name!r} is None but not nullable in v{version}")
                out.append(null)
                return
            out.append(write_len(len(value)))
            for item in value:
                write_elem(item, out)

        return write_array

    def struct_writer(
        self, cls: type[Message], fields: tuple[Field, ...], path: tuple[str, ...]
    ) -> Writer:
        path = (*path, cls.__name__)
        present, tagged, _ = self._split(fields)
        # (names, get, Struct.pack, its format, None) | (names, get, None, None, Writer)
        plan: list[tuple[tuple[str, ...], Callable[[Any], Any], Callable[..., bytes] | None, str | None, Any]] = []
        for names, fmt, f in self._fixed_runs(present):
            if fmt is not None:
                plan.append((names, attrgetter(*names), fmt.pack, fmt.format, None))
            else:
                plan.append((names, attrgetter(names[0]), None, None, self.field_writer(f, path)))
        tag_writers = sorted(
            (f.tag, f.name, _field_default(f, self.classes), self.field_writer(f, path))
            for f in tagged
        )
        flexible = self.flexible

        def write_struct(obj: Any, out: list[Any]) -> None:
            if type(obj) is dict:
                obj = cls(**obj)
            elif not isinstance(obj, Message) or obj._defaults is not cls._defaults:
                raise EncodeError(f"expected {cls.__qualname__} or dict, got {type(obj).__name__}", path)
            for names, get, pack, fmt, write in plan:
                try:
                    if pack is not None:
                        values = get(obj)
                        out.append(pack(*values) if len(names) > 1 else pack(values))
                    else:
                        write(get(obj), out)
                except EncodeError as exc:
                    if exc.path:
                        raise
                    raise EncodeError(exc.reason, (*path, *names)) from None
                except (struct.error, TypeError, AttributeError, OverflowError) as exc:
                    raise _explain(exc, obj, names, fmt, path) from None
            if flexible:
                _write_tagged_fields(obj, out, tag_writers)

        return write_struct


def _explain(
    exc: Exception, obj: Any, names: tuple[str, ...], fmt: str | None, path: tuple[str, ...]
) -> EncodeError:
    """Name the field of a failed fixed-width run (only runs on the error path)."""
    culprit = names[0]
    if fmt is not None and len(names) > 1:
        for name, code in zip(names, fmt.lstrip(">"), strict=True):
            try:
                struct.pack(">" + code, getattr(obj, name))
            except (struct.error, TypeError, AttributeError):
                culprit = name
                break
    value = getattr(obj, culprit, "<missing>")
    return EncodeError(f"cannot encode value {value!r}: {exc}", (*path, culprit))


def _read_tagged_fields(
    obj: Message,
    buf: memoryview,
    pos: int,
    tag_readers: dict[int, tuple[str, Reader]],
    where: str,
) -> int:
    count, pos = read_uvarint(buf, pos)
    if count * 2 > len(buf) - pos:
        raise TruncatedMessage(
            f"{where} declares {count} tagged field(s) at offset {pos} "
            f"but only {len(buf) - pos} byte(s) remain"
        )
    unknown = None
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise _truncated(f"{where} tagged field {tag}", size, pos, buf)
        known = tag_readers.get(tag)
        if known is None:
            if unknown is None:
                unknown = {}
            unknown[tag] = bytes(buf[pos:end])
        else:
            name, read = known
            value, stop = read(buf[:end], pos)
            if stop != end:
                raise MalformedMessage(
                    f"{where} tagged field {tag} ({name}) declared {size} byte(s) "
                    f"but its value used {stop - pos}"
                )
            setattr(obj, name, value)
        pos = end
    if unknown is not None:
        obj._unknown_tags = unknown
    return pos


def _write_tagged_fields(obj: Any, out: list[Any], tag_writers: list[Any]) -> None:
    entries = []
    for tag, name, (default, factory), write in tag_writers:
        value = getattr(obj, name)
        if value == (factory() if factory is not None else default):
            continue  # Kafka omits tagged fields that hold their default
        sub: list[Any] = []
        write(value, sub)
        entries.append((tag, b"".join(sub)))
    unknown = getattr(obj, "_unknown_tags", None)
    if unknown:
        entries.extend(unknown.items())
        entries.sort(key=lambda e: e[0])
    out.append(write_uvarint(len(entries)))
    for tag, data in entries:
        out.append(write_uvarint(tag))
        out.append(write_uvarint(len(data)))
        out.append(data)


# --------------------------------------------------------------------------- #
# Public per-message codec


class MessageCodec:
    """Encoder/decoder for one message schema across its declared versions."""

    def __init__(self, schema: MessageSchema) -> None:
        self.schema = schema
        self.classes = _build_classes(schema)
        self.cls: type[Message] = self.classes[schema.name]
        self.versions = schema.version_range
        self._readers: dict[int, Reader] = {}
        self._writers: dict[int, Writer] = {}

    def _check_version(self, version: int) -> None:
        if version not in self.versions:
            raise ValueError(
                f"{self.schema.name} version {version} is not declared; "
                f"expected {self.versions.low}..{self.versions.high}"
            )

    def reader(self, version: int) -> Reader:
        read = self._readers.get(version)
        if read is None:
            self._check_version(version)
            compiler = _Compiler(self.schema, self.classes, version)
            read = compiler.struct_reader(self.cls, self.schema.fields)
            self._readers[version] = read
        return read

    def writer(self, version: int) -> Writer:
        write = self._writers.get(version)
        if write is None:
            self._check_version(version)
            compiler = _Compiler(self.schema, self.classes, version)
            write = compiler.struct_writer(self.cls, self.schema.fields, ())
            self._writers[version] = write
        return write

    def decode(self, data: Buffer, version: int, pos: int = 0) -> tuple[Message, int]:
        """Decode one body starting at `pos`; returns (message, end position).

        Raises ProtocolError (TruncatedMessage / MalformedMessage) on bad input.
        """
        buf = data if type(data) is memoryview else memoryview(data)
        if buf.ndim != 1 or buf.itemsize != 1:
            buf = buf.cast("B")
        try:
            return self.reader(version)(buf, pos)
        except struct.error as exc:  # defensive: all reads are bounds-checked
            raise TruncatedMessage(f"{self.schema.name} v{version}: {exc}") from None

    def encode_into(self, message: Any, version: int, out: list[Any]) -> None:
        """Append the encoded body's chunks to `out` (join them once, at the end)."""
        self.writer(version)(message, out)

    def encode(self, message: Any, version: int) -> bytes:
        out: list[Any] = []
        self.writer(version)(message, out)
        return b"".join(out)


def skip_tagged_fields(buf: memoryview, pos: int, where: str) -> int:
    """Skip a tagged-field section whose tags are all unknown (e.g. header v2)."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if pos + size > len(buf):
            raise _truncated(f"{where} tagged field {tag}", size, pos, buf)
        pos += size
    return pos
