"""Idempotent-producer state: the pure validate/advance core, then the manager and its snapshots."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raftka.log.batch_header import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader, parse_header
from raftka.log.errors import InvalidProducerEpoch, OutOfOrderSequence
from raftka.log.producer_state import (
    APPEND,
    RETAINED_BATCHES,
    CorruptSnapshot,
    Outcome,
    OutcomeKind,
    ProducerEntry,
    ProducerStateManager,
    advance,
    decode_snapshot,
    encode_snapshot,
    snapshot_path,
    validate,
    validate_marker,
)
from raftka.log.record_batch import Record, encode_batch

PID = 1000
MAX_SEQ = (1 << 31) - 1


def header(
    *,
    pid: int = PID,
    epoch: int = 0,
    seq: int = 0,
    count: int = 1,
    base_offset: int = 0,
    control: bool = False,
    timestamp: int = 1_000,
) -> BatchHeader:
    """A header as parse_header would return it (the pure core reads only these fields)."""
    attributes = (ATTR_CONTROL | ATTR_TRANSACTIONAL) if control else 0
    return BatchHeader(
        base_offset=base_offset,
        batch_length=49,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=attributes,
        last_offset_delta=count - 1,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=-1 if control else seq,
        record_count=count,
    )


def entry_after(*headers: BatchHeader) -> ProducerEntry | None:
    entry = None
    for h in headers:
        entry = advance(entry, h)
    return entry


# An entry that has written sequences 0..9 in epoch 3 as five batches of two,
# at offsets 100..109.
FIVE = entry_after(
    *(header(epoch=3, seq=2 * i, count=2, base_offset=100 + 2 * i) for i in range(5))
)


# -- validate: table of cases -------------------------------------------------

ACCEPTED = [
    ("first batch of an unknown producer", None, header(seq=0)),
    ("unknown producer, any sequence", None, header(seq=42)),
    ("unknown producer, any epoch", None, header(epoch=9, seq=7)),
    ("in order", FIVE, header(epoch=3, seq=10, count=3)),
    ("epoch bump starting at 0", FIVE, header(epoch=4, seq=0)),
    ("no producer id", FIVE, header(pid=-1, epoch=-1, seq=-1)),
    ("no producer id, unknown", None, header(pid=-1, epoch=-1, seq=-1)),
    ("control batch, same epoch", FIVE, header(epoch=3, control=True)),
    ("control batch, higher epoch", FIVE, header(epoch=5, control=True)),
    (
        "empty window after a marker expects 0",
        entry_after(header(epoch=6, control=True)),
        header(epoch=6, seq=0),
    ),
    (
        "wrap from MAX to 0",
        entry_after(header(seq=MAX_SEQ - 1, count=2)),
        header(seq=0, count=1, base_offset=2),
    ),
]


@pytest.mark.parametrize("entry, h", [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_validate_accepts(entry, h):
    assert validate(entry, h) == APPEND


REJECTED = [
    (
        "gap",
        FIVE,
        header(epoch=3, seq=11),
        OutOfOrderSequence,
        ["expected sequence 10", "received 11"],
    ),
    (
        "repeat of last seq",
        FIVE,
        header(epoch=3, seq=9),
        OutOfOrderSequence,
        ["expected sequence 10"],
    ),
    (
        "lower epoch",
        FIVE,
        header(epoch=2, seq=10),
        InvalidProducerEpoch,
        ["epoch 2", "current epoch 3"],
    ),
    ("lower epoch marker", FIVE, header(epoch=1, control=True), InvalidProducerEpoch, ["epoch 1"]),
    (
        "epoch bump at seq 5",
        FIVE,
        header(epoch=4, seq=5),
        OutOfOrderSequence,
        ["new epoch 4", "received 5"],
    ),
    (
        "no wrap before MAX",
        entry_after(header(seq=MAX_SEQ - 2, count=2)),
        header(seq=0),
        OutOfOrderSequence,
        [f"expected sequence {MAX_SEQ}"],
    ),
    (
        "empty window after a marker, seq 3",
        entry_after(header(epoch=6, control=True)),
        header(epoch=6, seq=3),
        OutOfOrderSequence,
        ["expected sequence 0"],
    ),
]


@pytest.mark.parametrize(
    "entry, h, error, fragments", [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED]
)
def test_validate_rejects(entry, h, error, fragments):
    with pytest.raises(error) as info:
        validate(entry, h)
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.parametrize("i", range(RETAINED_BATCHES))
def test_duplicate_of_each_retained_batch_returns_original_offsets(i):
    # base_offset 999: before assignment, the producer's offset is meaningless.
    retry = header(epoch=3, seq=2 * i, count=2, base_offset=999)
    assert validate(FIVE, retry) == Outcome(OutcomeKind.DUPLICATE, 100 + 2 * i, 101 + 2 * i)


def test_sixth_oldest_batch_is_no_longer_a_duplicate():
    six = advance(FIVE, header(epoch=3, seq=10, count=2, base_offset=110))
    assert len(six.batches) == RETAINED_BATCHES
    assert validate(six, header(epoch=3, seq=2, count=2)).is_duplicate  # 2nd oldest still there
    with pytest.raises(OutOfOrderSequence, match="expected sequence 12, received 0"):
        validate(six, header(epoch=3, seq=0, count=2))


def test_duplicate_needs_the_same_range_and_epoch():
    with pytest.raises(OutOfOrderSequence):
        validate(FIVE, header(epoch=3, seq=2, count=3))  # same first seq, different last
    with pytest.raises(OutOfOrderSequence):
        validate(FIVE, header(epoch=4, seq=2, count=2))  # same range, newer epoch


def test_duplicate_across_the_wrap():
    entry = entry_after(
        header(seq=MAX_SEQ - 1, count=3, base_offset=50),  # MAX-1, MAX, 0
        header(seq=1, count=1, base_offset=53),
    )
    assert entry.batches[0][:2] == (MAX_SEQ - 1, 0)
    assert validate(entry, header(seq=MAX_SEQ - 1, count=3)) == Outcome(
        OutcomeKind.DUPLICATE, 50, 52
    )
    assert validate(entry, header(seq=2)) == APPEND


# -- advance ---------------------------------------------------------------------


def test_advance_records_offsets_and_keeps_five_newest_last():
    entry = advance(FIVE, header(epoch=3, seq=10, count=4, base_offset=110, timestamp=7_000))
    assert entry.epoch == 3
    assert entry.batches[-1] == (10, 13, 110, 113)
    assert entry.batches[0] == (2, 3, 102, 103)
    assert entry.last_sequence == 13
    assert entry.last_timestamp == 7_000


def test_advance_epoch_bump_clears_the_window():
    entry = advance(FIVE, header(epoch=4, seq=0, count=2, base_offset=200))
    assert entry == ProducerEntry(PID, 4, ((0, 1, 200, 201),), 1_000)


def test_advance_control_batch_updates_epoch_without_sequence():
    same = advance(FIVE, header(epoch=3, control=True, base_offset=110))
    assert same.batches == FIVE.batches and same.epoch == 3
    bumped = advance(FIVE, header(epoch=7, control=True, base_offset=110))
    assert bumped.epoch == 7 and bumped.batches == ()


def test_advance_never_raises_on_odd_replay():
    # Lower epoch and a sequence gap: what the leader wrote is the new truth.
    entry = advance(FIVE, header(epoch=1, seq=40, count=1, base_offset=300))
    assert entry.epoch == 1 and entry.batches == ((40, 40, 300, 300),)
    gap = advance(FIVE, header(epoch=3, seq=77, count=1, base_offset=300))
    assert gap.batches == ((77, 77, 300, 300),)
    assert validate(gap, header(epoch=3, seq=78)) == APPEND


def test_advance_rejects_untracked_batches():
    with pytest.raises(ValueError, match="producer id -1"):
        advance(None, header(pid=-1))


# -- the manager, over real encoded batches --------------------------------------


def real_header(
    records: int, *, base_offset: int, pid: int, epoch: int, seq: int, control: bool = False
):
    recs = [Record(key=b"k%d" % i, value=b"v", timestamp=5_000 + i) for i in range(records)]
    if control:
        recs = [Record(key=b"\x00\x00\x00\x00", value=b"\x00\x00\x00\x00\x00\x00", timestamp=5_000)]
    buf = encode_batch(
        recs,
        base_offset=base_offset,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=-1 if control else seq,
        transactional=control,
        control=control,
    )
    return parse_header(buf)


def write_history(manager: ProducerStateManager) -> int:
    """Three producers and a plain one, as a partition log would apply them; returns the end offset."""
    offset = 0
    seqs = {1: 0, 2: 0, 3: 0}
    for round_ in range(4):
        for pid in (1, 2, 3):
            n = 1 + (round_ + pid) % 3
            h = real_header(n, base_offset=offset, pid=pid, epoch=0, seq=seqs[pid])
            assert manager.check(h) is None
            manager.update(h)
            seqs[pid] += n
            offset += n
        plain = real_header(2, base_offset=offset, pid=-1, epoch=-1, seq=-1)
        assert manager.check(plain) is None
        manager.update(plain)
        offset += 2
    marker = real_header(1, base_offset=offset, pid=3, epoch=1, seq=-1, control=True)
    manager.update(marker)
    return offset + 1


def test_manager_rebuilds_from_real_headers_and_answers_duplicates(tmp_path):
    manager = ProducerStateManager(tmp_path)
    end = write_history(manager)
    assert manager.last_offset() == end - 1
    assert set(manager.producers()) == {1, 2, 3}
    assert manager.producers()[3].epoch == 1 and manager.producers()[3].batches == ()
    first = manager.producers()[1].batches[0]
    retry = real_header(first[1] - first[0] + 1, base_offset=0, pid=1, epoch=0, seq=first[0])
    assert manager.check(retry) == (first[2], first[3])
    with pytest.raises(InvalidProducerEpoch):
        manager.check(real_header(1, base_offset=0, pid=3, epoch=0, seq=0))


def test_snapshot_round_trip(tmp_path):
    manager = ProducerStateManager(tmp_path)
    end = write_history(manager)
    manager.take_snapshot(end)
    assert snapshot_path(tmp_path, end).name == f"{end:020d}.snapshot"

    reloaded = ProducerStateManager(tmp_path)
    assert reloaded.load(0, end) == end
    assert dict(reloaded.producers()) == dict(manager.producers())
    assert reloaded.last_offset() == end - 1
    for entry in manager.producers().values():
        for first_seq, last_seq, first_off, last_off in entry.batches:
            retry = real_header(
                last_seq - first_seq + 1,
                base_offset=0,
                pid=entry.producer_id,
                epoch=entry.epoch,
                seq=first_seq,
            )
            assert reloaded.check(retry) == manager.check(retry) == (first_off, last_off)
    # The next in-order batch is accepted by both, a gap refused by both.
    nxt = real_header(
        1, base_offset=end, pid=1, epoch=0, seq=manager.producers()[1].last_sequence + 1
    )
    assert reloaded.check(nxt) is None
    gap = real_header(
        1, base_offset=end, pid=1, epoch=0, seq=manager.producers()[1].last_sequence + 5
    )
    with pytest.raises(OutOfOrderSequence):
        reloaded.check(gap)


def test_snapshot_of_an_empty_state_and_no_snapshot(tmp_path):
    manager = ProducerStateManager(tmp_path)
    assert manager.load(0, 0) == 0 and manager.last_offset() == -1
    assert manager.load(7, 30) == 7 and manager.last_offset() == 6
    manager.take_snapshot(30)
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load(7, 30) == 30
    assert dict(fresh.producers()) == {}


def test_take_snapshot_refuses_an_offset_it_has_passed(tmp_path):
    manager = ProducerStateManager(tmp_path)
    manager.update(header(seq=0, count=3, base_offset=10))
    with pytest.raises(
        ValueError, match="snapshot offset 12 must be above the last applied offset 12"
    ):
        manager.take_snapshot(12)
    manager.take_snapshot(13)


def build_snapshots(tmp_path) -> tuple[ProducerStateManager, dict[int, dict]]:
    """Snapshots at 10, 20 and 30 over a producer writing 10 records per batch; returns states."""
    manager = ProducerStateManager(tmp_path)
    states = {}
    for i in range(3):
        manager.update(header(seq=10 * i, count=10, base_offset=10 * i))
        manager.take_snapshot(10 * (i + 1))
        states[10 * (i + 1)] = dict(manager.producers())
    return manager, states


def test_torn_snapshot_is_ignored_and_falls_back(tmp_path):
    _manager, states = build_snapshots(tmp_path)
    newest = snapshot_path(tmp_path, 30)
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) - 7])  # torn write

    reloaded = ProducerStateManager(tmp_path)
    assert reloaded.load(0, 30) == 20
    assert dict(reloaded.producers()) == states[20]
    assert not newest.exists()  # deleted, not retried forever

    # A flipped bit in the body (same length) is caught by the CRC.
    middle = snapshot_path(tmp_path, 20)
    data = bytearray(middle.read_bytes())
    data[-1] ^= 0x01
    middle.write_bytes(bytes(data))
    assert ProducerStateManager(tmp_path).load(0, 30) == 10


def test_all_snapshots_corrupt_means_full_replay(tmp_path):
    build_snapshots(tmp_path)
    for offset in (10, 20, 30):
        snapshot_path(tmp_path, offset).write_bytes(b"")
    manager = ProducerStateManager(tmp_path)
    assert manager.load(0, 30) == 0
    assert dict(manager.producers()) == {}


def test_load_ignores_snapshots_out_of_range(tmp_path):
    _manager, states = build_snapshots(tmp_path)
    reloaded = ProducerStateManager(tmp_path)
    # Log end at 25: the snapshot at 30 describes batches that are gone.
    assert reloaded.load(0, 25) == 20
    assert not snapshot_path(tmp_path, 30).exists()
    # Log start at 21: the snapshot at 20 predates the log; replay from the start.
    assert ProducerStateManager(tmp_path).load(21, 25) == 21


def test_truncate_and_reload_drops_newer_snapshots(tmp_path):
    manager, states = build_snapshots(tmp_path)
    assert manager.truncate_and_reload(0, 15) == 10
    assert dict(manager.producers()) == states[10]
    assert manager.last_offset() == 9
    assert manager.snapshot_offsets() == [10]
    # Replay of the surviving headers after 10 then continues cleanly.
    manager.update(header(seq=10, count=5, base_offset=10))
    assert manager.check(header(seq=15)) is None
    assert manager.check(header(seq=10, count=5)) == (10, 14)


def test_delete_snapshots_below(tmp_path):
    manager, _states = build_snapshots(tmp_path)
    manager.delete_snapshots_below(20)
    assert manager.snapshot_offsets() == [20, 30]


def test_leftover_temp_file_is_removed(tmp_path):
    manager, _states = build_snapshots(tmp_path)
    tmp = tmp_path / f"{40:020d}.snapshot.tmp"
    tmp.write_bytes(b"half")
    assert ProducerStateManager(tmp_path).load(0, 40) == 30
    assert not tmp.exists()


entries = st.builds(
    lambda pid, epoch, ts, batches: ProducerEntry(pid, epoch, tuple(batches), ts),
    st.integers(0, 2**63 - 1),
    st.integers(-1, 2**15 - 1),
    st.integers(-1, 2**63 - 1),
    st.lists(
        st.tuples(
            st.integers(-1, MAX_SEQ),
            st.integers(-1, MAX_SEQ),
            st.integers(0, 2**62),
            st.integers(0, 2**62),
        ),
        max_size=RETAINED_BATCHES,
    ),
)


@given(st.integers(0, 2**62), st.lists(entries, max_size=8))
def test_snapshot_codec_round_trips_and_detects_any_truncation(offset, entry_list):
    state = {e.producer_id: e for e in entry_list}
    data = encode_snapshot(offset, state)
    assert decode_snapshot(data) == (offset, state)
    for cut in {0, 5, len(data) // 2, len(data) - 1}:
        with pytest.raises(CorruptSnapshot, match="snapshot"):
            decode_snapshot(data[:cut])


@pytest.mark.parametrize(("entry_epoch", "marker_epoch", "transaction_version", "refused"), [
    (3, 3, 0, False),  # the classic protocol: the marker carries the transaction's own epoch
    (3, 4, 0, False),  # a fencing abort's bumped epoch
    (3, 2, 0, True),
    (3, 4, 2, False),  # transaction version 2: always a bumped epoch (KIP-1228)
    (3, 3, 2, True),  # a late or repeated marker of version 2
    (3, 2, 2, True),
])
def test_a_marker_of_transaction_version_2_needs_a_newer_epoch(entry_epoch, marker_epoch, transaction_version,
                                                               refused):
    entry = ProducerEntry(7, entry_epoch)
    if refused:
        with pytest.raises(InvalidProducerEpoch):
            validate_marker(entry, 7, marker_epoch, 0, transaction_version)
    else:
        validate_marker(entry, 7, marker_epoch, 0, transaction_version)
