"""`raftka log dump`: print segment files like Kafka's kafka-dump-log.

Reads `.log` files batch by batch through the header view (and, with
--print-records, the full decoder; a transaction marker's type and coordinator
epoch are always shown, as `endTxnMarker` / `coordinatorEpoch`); `.index`,
`.timeindex` and `.txnindex` files entry by entry. A damaged batch is reported with its position and the dump goes on to
the next file; the exit status is 1 when anything was invalid.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterable
from pathlib import Path

import click

from raftka.log.batch_header import (
    HEADER_SIZE,
    BatchHeader,
    compute_crc,
    parse_header,
    peek_batch_size,
)
from raftka.log.compression import Compression
from raftka.log.errors import LogError

_INDEX_ENTRY = struct.Struct(">II")  # relative offset, position
_TIME_INDEX_ENTRY = struct.Struct(">qI")  # timestamp, relative offset


def dump_paths(paths: Iterable[str], *, print_records: bool = False, verify_index: bool = False) -> int:
    """Dump every path; returns the process exit status (0 all valid, 1 otherwise)."""
    status = 0
    for raw in paths:
        path = Path(raw)
        click.echo(f"Dumping {path}")
        try:
            if path.suffix == ".log":
                ok = _dump_log(path, print_records)
            elif path.suffix == ".index":
                ok = _dump_index(path, verify_index)
            elif path.suffix == ".timeindex":
                ok = _dump_time_index(path, verify_index)
            elif path.suffix == ".txnindex":
                ok = _dump_txn_index(path)
            else:
                click.echo(
                    f"  cannot dump {path.name}: expected a .log, .index, .timeindex or .txnindex file", err=True
                )
                ok = False
        except OSError as exc:
            click.echo(f"  cannot read {path}: {exc}", err=True)
            ok = False
        status |= 0 if ok else 1
    return status


def _base_offset(path: Path) -> int:
    try:
        return int(path.stem)
    except ValueError as exc:
        raise click.ClickException(
            f"{path.name}: segment files are named by their 20-digit base offset, got {path.stem!r}"
        ) from exc


def _codec_name(header: BatchHeader) -> str:
    try:
        return Compression(header.compression).name.lower()
    except ValueError:
        return f"unknown({header.compression})"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _format_bytes(data: bytes | None) -> str:
    if data is None:
        return "null"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + data.hex()
    return text if text.isprintable() else "0x" + data.hex()


def _map(path: Path) -> bytes | mmap.mmap:
    with path.open("rb") as f:
        if path.stat().st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _dump_log(path: Path, print_records: bool) -> bool:
    buf = _map(path)
    ok = True
    pos = 0
    end = len(buf)
    try:
        while pos < end:
            size = peek_batch_size(buf, pos)
            if size is None or size < HEADER_SIZE:
                click.echo(f"  position: {pos} invalid: {end - pos} trailing bytes are not a batch")
                return False
            try:
                header = parse_header(buf, pos)
            except LogError as exc:
                click.echo(f"  position: {pos} invalid: {exc}")
                return False
            crc_ok = compute_crc(buf, header) == header.crc
            ok &= crc_ok
            ts_kind = "LogAppendTime" if header.is_log_append_time else "CreateTime"
            click.echo(
                f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
                f"count: {header.record_count} baseSequence: {header.base_sequence} "
                f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
                f"producerEpoch: {header.producer_epoch} "
                f"partitionLeaderEpoch: {header.partition_leader_epoch} "
                f"isTransactional: {_bool(header.is_transactional)} "
                f"isControl: {_bool(header.is_control)} position: {pos} "
                f"{ts_kind}: {header.max_timestamp} size: {header.size} magic: {header.magic} "
                f"compresscodec: {_codec_name(header)} crc: {header.crc} isvalid: {_bool(crc_ok)}"
            )
            if print_records and crc_ok:
                ok &= _print_records(buf, pos, ts_kind)
            elif header.is_control and crc_ok:
                ok &= _print_marker(buf, header)
            pos += header.size
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()
    return ok


def _print_records(buf: bytes | mmap.mmap, pos: int, ts_kind: str) -> bool:
    from raftka.log.record_batch import decode_batch

    try:
        batch = decode_batch(buf, pos)
    except LogError as exc:
        click.echo(f"| cannot decode records: {exc}")
        return False
    header = batch.header
    for index, record in enumerate(batch.records):
        if header.is_control:
            click.echo(f"| offset: {record.offset} {ts_kind}: {record.timestamp} " + _control_text(record))
            continue
        sequence = header.base_sequence + index if header.base_sequence >= 0 else -1
        header_keys = ", ".join(k for k, _ in record.headers)
        key_size = -1 if record.key is None else len(record.key)
        value_size = -1 if record.value is None else len(record.value)
        click.echo(
            f"| offset: {record.offset} {ts_kind}: {record.timestamp} keySize: {key_size} "
            f"valueSize: {value_size} sequence: {sequence} headerKeys: [{header_keys}] "
            f"key: {_format_bytes(record.key)} payload: {_format_bytes(record.value)}"
        )
    return True


def _control_text(record) -> str:
    """Kafka's DumpLogSegments words for a control record: `endTxnMarker: COMMIT coordinatorEpoch: 3`."""
    from raftka.log.control_record import MARKER_TYPES, parse_control_key, parse_marker_value

    try:
        kind = parse_control_key(record.key)
        if kind not in MARKER_TYPES:
            return f"controlType: {kind}"
        return f"endTxnMarker: {MARKER_TYPES[kind]} coordinatorEpoch: {parse_marker_value(record.value)}"
    except LogError as exc:
        return f"invalid control record: {exc}"


def _print_marker(buf: bytes | mmap.mmap, header: BatchHeader) -> bool:
    from raftka.log.record_batch import decode_batch

    try:
        records = decode_batch(buf, header.position, verify_crc=False).records
    except LogError as exc:
        click.echo(f"| cannot decode the control record: {exc}")
        return False
    for record in records:
        click.echo(f"| offset: {record.offset} " + _control_text(record))
    return True


def _dump_txn_index(path: Path) -> bool:
    """Each aborted transaction: Kafka's `version producerId firstOffset lastOffset lastStableOffset`."""
    from raftka.log.txn_index import ENTRY

    entries, trailing = _read_entries(path, ENTRY)
    ok = trailing == 0
    last = -1
    for version, producer_id, first, last_offset, lso in entries:
        note = ""
        if last_offset <= last:
            note, ok = " (last offsets not increasing)", False
        last = last_offset
        click.echo(f"version: {version} producerId: {producer_id} firstOffset: {first} "
                   f"lastOffset: {last_offset} lastStableOffset: {lso}{note}")
    if trailing:
        click.echo(f"  {trailing} trailing bytes: not a whole transaction-index entry")
    return ok


def _read_entries(path: Path, entry: struct.Struct) -> tuple[list[tuple[int, ...]], int]:
    data = path.read_bytes()
    usable = len(data) - len(data) % entry.size
    return [entry.unpack_from(data, i) for i in range(0, usable, entry.size)], len(data) - usable


def _dump_index(path: Path, verify: bool) -> bool:
    base = _base_offset(path)
    entries, trailing = _read_entries(path, _INDEX_ENTRY)
    positions = _batch_positions(path.with_suffix(".log")) if verify else None
    ok = trailing == 0
    last = -1
    for relative, position in entries:
        if relative == 0 and position == 0 and last >= 0:
            break  # preallocated zero tail
        note = ""
        if positions is not None:
            first = positions.get(position)
            if first is None:
                note, ok = " (no batch starts at this position)", False
            elif not first[0] <= base + relative <= first[1]:
                note, ok = f" (batch at this position holds offsets {first[0]}-{first[1]})", False
        if base + relative < last:
            note, ok = note + " (offsets not increasing)", False
        last = base + relative
        click.echo(f"offset: {base + relative} position: {position}{note}")
    if trailing:
        click.echo(f"  {trailing} trailing bytes: not a whole index entry")
    return ok


def _dump_time_index(path: Path, verify: bool) -> bool:
    base = _base_offset(path)
    entries, trailing = _read_entries(path, _TIME_INDEX_ENTRY)
    ranges = sorted(_batch_positions(path.with_suffix(".log")).values()) if verify else None
    ok = trailing == 0
    last_ts = -1
    for timestamp, relative in entries:
        if timestamp == 0 and relative == 0 and last_ts >= 0:
            break
        note = ""
        if timestamp < last_ts:
            note, ok = " (timestamps not increasing)", False
        if ranges is not None and not any(lo <= base + relative <= hi for lo, hi in ranges):
            note, ok = note + " (no batch holds this offset)", False
        last_ts = timestamp
        click.echo(f"timestamp: {timestamp} offset: {base + relative}{note}")
    if trailing:
        click.echo(f"  {trailing} trailing bytes: not a whole time-index entry")
    return ok


def _batch_positions(log_path: Path) -> dict[int, tuple[int, int]]:
    """position -> (base offset, last offset) of every readable batch of a .log file."""
    out: dict[int, tuple[int, int]] = {}
    buf = _map(log_path)
    pos = 0
    try:
        while pos < len(buf):
            try:
                header = parse_header(buf, pos)
            except LogError:
                break
            out[pos] = (header.base_offset, header.last_offset)
            pos += header.size
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()
    return out
