"""A bit flipped inside an already-flushed segment is found by CRC on open and never served."""

from __future__ import annotations

import structlog

from raftka.log.batch_header import iter_headers
from raftka.log.config import LogConfig
from raftka.log.partition_log import PartitionLog
from raftka.log.record_batch import Record, encode_batch


def _write(tmp_path, batches: int = 30) -> PartitionLog:
    config = LogConfig(segment_bytes=2048)
    plog = PartitionLog.open(tmp_path, "c", 0, config, now_ms=1000)
    for i in range(batches):
        plog.append(encode_batch([Record(key=b"k", value=f"value-{i:04d}".encode() * 8)]), 0, now_ms=1000 + i)
    plog.close()  # clean close: the recovery point covers everything
    return plog


def test_flipped_bit_in_a_flushed_segment_cuts_the_log_there(tmp_path):
    _write(tmp_path)
    part = tmp_path / "c-0"
    segments = sorted(part.glob("*.log"))
    assert len(segments) >= 3
    victim = segments[1]
    data = bytearray(victim.read_bytes())
    headers = list(iter_headers(bytes(data)))
    bad = headers[len(headers) // 2]
    data[bad.position + bad.size - 3] ^= 0x10  # inside the records, covered by the CRC
    victim.write_bytes(bytes(data))
    later = {p.name: p.read_bytes() for p in segments[2:]}

    with structlog.testing.capture_logs() as logs:
        plog = PartitionLog.open(tmp_path, "c", 0, LogConfig(segment_bytes=2048), now_ms=5000)
    try:
        assert plog.log_end_offset == bad.base_offset, "the log must end just before the corrupt batch"
        assert any(e["event"] == "log.corrupt_batch" and e["log_level"] == "error" for e in logs)
        # Everything still served is intact; later segments are out of the log ...
        served = plog.read_bytes(0, 1 << 20)
        offsets = [h.base_offset for h in iter_headers(served, verify=True)]
        assert offsets == list(range(bad.base_offset))
        assert all(p.exists() is False for p in segments[2:])
        # ... but a flipped bit is no proof the rest is garbage: they and the bytes cut are kept
        # aside (#27), byte for byte.
        kept = {p.name.split(".log.")[0] + ".log": p.read_bytes() for p in part.glob("*.log.*.stray")
                if ".cut-at-byte-" not in p.name}
        assert kept == later
        (cut,) = part.glob(f"{victim.name}.cut-at-byte-{bad.position}.*.stray")
        assert cut.read_bytes() == bytes(data[bad.position:])
        assert [e["segment"] for e in logs if e["event"] == "log.recovery.segment_set_aside"] == list(later)
        # The log keeps working: the next append lands right after the cut.
        info = plog.append(encode_batch([Record(key=b"k", value=b"new")]), 1, now_ms=6000)
        assert info.first_offset == bad.base_offset
    finally:
        plog.close()


def test_verification_can_be_turned_off(tmp_path):
    _write(tmp_path)
    plog = PartitionLog.open(tmp_path, "c", 0, LogConfig(segment_bytes=2048), now_ms=5000, verify_flushed=False)
    try:
        assert plog.log_end_offset == 30
    finally:
        plog.close()
