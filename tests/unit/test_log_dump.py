"""`raftka log dump` on real segment files written by PartitionLog."""

from __future__ import annotations

import re

from click.testing import CliRunner

from raftka.cli.main import main
from raftka.log.config import LogConfig
from raftka.log.partition_log import PartitionLog
from raftka.log.record_batch import Record, encode_batch


def _write_log(tmp_path, batches: int = 20):
    config = LogConfig(index_interval_bytes=64)
    plog = PartitionLog.open(tmp_path, "dump", 0, config, now_ms=1_000)
    for i in range(batches):
        records = [Record(key=f"k{i}-{j}".encode(), value=f"v{i}-{j}".encode(), headers=(("h", b"x"),),
                          timestamp=1_000 + i) for j in range(3)]
        plog.append(encode_batch(records, compression=i % 5, producer_id=7, producer_epoch=0,
                                 base_sequence=3 * i), leader_epoch=2, now_ms=1_000 + i)
    plog.close()
    return tmp_path / "dump-0"


def test_dump_log_lists_every_batch(tmp_path):
    part = _write_log(tmp_path)
    result = CliRunner().invoke(main, ["log", "dump", str(part / "00000000000000000000.log")])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("baseOffset:")]
    assert len(lines) == 20
    assert lines[0].startswith("baseOffset: 0 lastOffset: 2 count: 3 baseSequence: 0 lastSequence: 2 producerId: 7")
    assert "partitionLeaderEpoch: 2" in lines[0] and "isvalid: true" in lines[0]
    codecs = {re.search(r"compresscodec: (\w+)", line).group(1) for line in lines}
    assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}


def test_dump_print_records_shows_keys_values_and_headers(tmp_path):
    part = _write_log(tmp_path, batches=2)
    result = CliRunner().invoke(main, ["log", "dump", "--print-records", str(part / "00000000000000000000.log")])
    assert result.exit_code == 0, result.output
    assert "| offset: 4 CreateTime: 1001 keySize: 4 valueSize: 4 sequence: 4 headerKeys: [h] key: k1-1 payload: v1-1" in result.output


def test_dump_indexes_and_verify_them(tmp_path):
    part = _write_log(tmp_path)
    result = CliRunner().invoke(main, ["log", "dump", "--verify-index", str(part / "00000000000000000000.index"),
                                       str(part / "00000000000000000000.timeindex")])
    assert result.exit_code == 0, result.output
    assert re.search(r"^offset: \d+ position: \d+$", result.output, re.M)
    assert re.search(r"^timestamp: \d+ offset: \d+$", result.output, re.M)
    assert "(no batch" not in result.output


def test_a_flipped_bit_is_reported_and_fails(tmp_path):
    part = _write_log(tmp_path, batches=3)
    segment = part / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[-5] ^= 0x01  # inside the last batch's records: covered by its CRC
    segment.write_bytes(bytes(data))
    result = CliRunner().invoke(main, ["log", "dump", str(segment)])
    assert result.exit_code == 1
    assert result.output.count("isvalid: true") == 2 and "isvalid: false" in result.output


def test_unknown_file_kind_is_a_clear_error(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("hi")
    result = CliRunner().invoke(main, ["log", "dump", str(other)])
    assert result.exit_code == 1
    assert "expected a .log, .index, .timeindex or .txnindex file" in result.output


def test_dump_shows_markers_and_the_txn_index(tmp_path):
    plog = PartitionLog.open(tmp_path, "txn", 0, LogConfig(), now_ms=1_000)
    plog.append(encode_batch([Record(None, b"v")], producer_id=9, producer_epoch=1, base_sequence=0,
                             transactional=True), leader_epoch=0, now_ms=1_000)
    plog.append_marker(9, 1, 4, False, 0, now_ms=1_001)
    plog.append(encode_batch([Record(None, b"w")], producer_id=9, producer_epoch=1, base_sequence=1,
                             transactional=True), leader_epoch=0, now_ms=1_002)
    plog.append_marker(9, 1, 5, True, 0, now_ms=1_003)
    plog.close()
    part = tmp_path / "txn-0"
    result = CliRunner().invoke(main, ["log", "dump", str(part / "00000000000000000000.log")])
    assert result.exit_code == 0, result.output
    assert "| offset: 1 endTxnMarker: ABORT coordinatorEpoch: 4" in result.output
    assert "| offset: 3 endTxnMarker: COMMIT coordinatorEpoch: 5" in result.output
    printed = CliRunner().invoke(main, ["log", "dump", "--print-records", str(part / "00000000000000000000.log")])
    assert "| offset: 3 CreateTime: 1003 endTxnMarker: COMMIT coordinatorEpoch: 5" in printed.output
    index = CliRunner().invoke(main, ["log", "dump", str(part / "00000000000000000000.txnindex")])
    assert index.exit_code == 0, index.output
    assert "version: 0 producerId: 9 firstOffset: 0 lastOffset: 1 lastStableOffset: 2" in index.output
