"""The perf tools' arithmetic: percentiles, rates, windows, throttling, merging."""

import pytest

from raftka.testing.perf import (
    MB,
    LatencySummary,
    ProduceResult,
    ProduceStats,
    ProduceWindow,
    Throttle,
    format_result,
    format_window,
    merge_results,
    merge_windows,
    payload,
    percentile,
    rates,
    summarize_latencies,
)


@pytest.mark.parametrize(("values", "fraction", "expected"), [
    ([], 0.5, 0.0),
    ([7.0], 0.0, 7.0),
    ([7.0], 0.999, 7.0),
    ([1.0, 2.0, 3.0, 4.0], 0.5, 2.0),   # nearest rank: ceil(0.5 * 4) = 2nd
    ([1.0, 2.0, 3.0, 4.0], 0.51, 3.0),
    ([1.0, 2.0, 3.0, 4.0], 1.0, 4.0),
    (list(range(1, 1001)), 0.99, 990),
    (list(range(1, 1001)), 0.999, 999),
])
def test_percentile_is_nearest_rank(values, fraction, expected):
    assert percentile(values, fraction) == expected


def test_percentile_rejects_a_fraction_outside_0_1():
    with pytest.raises(ValueError, match="fraction must lie in"):
        percentile([1.0], 1.5)


def test_summary_of_1_to_100():
    summary = summarize_latencies([float(x) for x in reversed(range(1, 101))])
    assert summary == LatencySummary(100, 50.5, 50.0, 95.0, 99.0, 100.0, 100.0)


def test_rates_in_records_and_mebibytes_per_second():
    assert rates(2048, 2048 * 1024, 2.0) == (1024.0, 1.0)
    assert rates(10, 100, 0.0) == (0.0, 0.0)


def test_stats_close_a_window_each_interval_and_total_at_the_end():
    stats = ProduceStats(num_records=6, report_interval_s=1.0, start=100.0)
    windows = [stats.record(lat, 1000, now) for lat, now in
               [(2.0, 100.2), (4.0, 100.5), (6.0, 101.0),      # window closes at 101.0
                (1.0, 101.5), (3.0, 101.9), (5.0, 102.5)]]     # and again at 102.5
    closed = [w for w in windows if w is not None]
    assert closed == [ProduceWindow(3, 3000, 1.0, 4.0, 6.0), ProduceWindow(3, 3000, 1.5, 3.0, 5.0)]
    assert closed[1].records_per_s == pytest.approx(2.0)
    stats.error(RuntimeError("boom"))
    result = stats.result(103.0)
    assert (result.records, result.bytes, result.errors) == (6, 6000, 1)
    assert result.elapsed_s == pytest.approx(3.0)
    assert result.records_per_s == pytest.approx(2.0)
    assert result.mb_per_s == pytest.approx(2000 / MB)
    assert result.latency.p50_ms == 3.0 and result.latency.max_ms == 6.0
    assert result.first_error == "RuntimeError: boom"


def test_stats_sample_latencies_beyond_the_cap_like_kafka():
    stats = ProduceStats(num_records=1_500_000, report_interval_s=5.0, start=0.0)
    assert stats.sample_every == 3
    for i in range(9):
        stats.record(float(i), 1, 0.0)
    assert stats.samples == [0.0, 3.0, 6.0]


def test_throttle_paces_to_the_target_rate():
    throttle = Throttle(100.0, start=10.0)
    assert throttle.delay(0, 10.0) == 0.0
    assert throttle.delay(50, 10.2) == pytest.approx(0.3)   # record 50 is due at 10.5
    assert throttle.delay(50, 11.0) == 0.0                  # late: send at once
    assert Throttle(-1, 0.0).delay(10**9, 0.0) == 0.0
    with pytest.raises(ValueError, match="throughput must be > 0"):
        Throttle(0, 0.0)


def test_merging_parallel_producers():
    a = ProduceResult(100, 1000, 2.0, 0, summarize_latencies([1.0, 2.0]))
    b = ProduceResult(300, 3000, 4.0, 2, summarize_latencies([3.0, 10.0]), "Err: x")
    merged = merge_results([a, b], [[1.0, 2.0], [3.0, 10.0]])
    assert (merged.records, merged.bytes, merged.elapsed_s, merged.errors) == (400, 4000, 4.0, 2)
    assert merged.records_per_s == 100.0
    assert merged.latency == summarize_latencies([1.0, 2.0, 3.0, 10.0])
    assert merged.first_error == "Err: x"
    w = merge_windows([ProduceWindow(100, 100, 1.0, 2.0, 5.0), ProduceWindow(300, 300, 1.0, 4.0, 9.0)])
    assert w.records_per_s == pytest.approx(400.0)
    assert w.avg_latency_ms == pytest.approx(3.5) and w.max_latency_ms == 9.0


def test_lines_read_like_kafkas_tool():
    assert format_window(ProduceWindow(500, 500 * 1024, 1.0, 2.5, 7.0)) == (
        "500 records sent, 500.0 records/sec (0.49 MB/sec), 2.5 ms avg latency, 7.0 ms max latency.")
    line = format_result(ProduceResult(10, 10240, 1.0, 0, LatencySummary(10, 1, 2, 3, 4, 5, 6)))
    assert line.endswith("2.00 ms 50th, 3.00 ms 95th, 4.00 ms 99th, 5.00 ms 99.9th.")


def test_payload_is_letters_of_the_requested_size():
    value = payload(1024)
    assert len(value) == 1024 and set(value) <= set(range(ord("A"), ord("Z") + 1))
    assert payload(0) == b""
