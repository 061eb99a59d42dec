"""`raftka perf produce/consume` on tiny runs against a real one-node server:
the JSON shape and the tool's own arithmetic on real measurements."""

import json
import re
import signal
import subprocess

import pytest

from raftka.client.admin import NewTopic
from raftka.client.blocking import Admin
from tests.integration.sdk_broker import RAFTKA, one_node_server, raftka_env

RESULT_KEYS = {"type", "records", "bytes", "elapsed_s", "records_per_s", "mb_per_s", "errors",
               "first_error", "latency_ms"}
LATENCY_KEYS = {"count", "avg_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms"}


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    with one_node_server(tmp_path_factory.mktemp("perf"), num_partitions=2) as servers:
        with Admin(servers) as admin:
            admin.create_topics([NewTopic("perf", 2, 1)])
        yield servers


def perf(bootstrap, *args):
    out = subprocess.run([*RAFTKA, "perf", *args, "--bootstrap-server", bootstrap],
                         capture_output=True, text=True, env=raftka_env(), timeout=90)
    return out


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def check_result_arithmetic(result, records, size):
    assert set(result) >= RESULT_KEYS and set(result["latency_ms"]) == LATENCY_KEYS
    assert result["type"] == "result"
    assert result["records"] == records and result["bytes"] == records * size
    assert result["errors"] == 0 and result["first_error"] is None
    assert result["records_per_s"] == pytest.approx(records / result["elapsed_s"])
    assert result["mb_per_s"] == pytest.approx(records * size / 2**20 / result["elapsed_s"])
    lat = result["latency_ms"]
    assert lat["count"] == records
    assert 0 < lat["p50_ms"] <= lat["p95_ms"] <= lat["p99_ms"] <= lat["p999_ms"] <= lat["max_ms"]
    assert 0 < lat["avg_ms"] <= lat["max_ms"]
    # The whole run cannot take less than its slowest acknowledgement.
    assert lat["max_ms"] <= result["elapsed_s"] * 1000 + 1


def test_produce_json_windows_and_result(bootstrap):
    out = perf(bootstrap, "produce", "--topic", "perf", "--num-records", "400",
               "--record-size", "100", "--throughput", "1000", "--acks", "all",
               "--reporting-interval", "100", "--json")
    assert out.returncode == 0, out.stderr
    lines = json_lines(out.stdout)
    *windows, result = lines
    check_result_arithmetic(result, 400, 100)
    # Throttled to 1000 records/s: 400 records take at least ~0.4 s.
    assert result["elapsed_s"] >= 0.35
    assert windows and all(w["type"] == "window" for w in windows)
    assert sum(w["records"] for w in windows) <= 400
    for w in windows:
        assert w["records_per_s"] == pytest.approx(w["records"] / w["elapsed_s"])
        assert w["avg_latency_ms"] <= w["max_latency_ms"] <= result["latency_ms"]["max_ms"]


def test_produce_with_two_processes_merges_their_results(bootstrap):
    out = perf(bootstrap, "produce", "--topic", "perf", "--num-records", "301",
               "--record-size", "64", "--producers", "2", "--json")
    assert out.returncode == 0, out.stderr
    result = json_lines(out.stdout)[-1]
    check_result_arithmetic(result, 301, 64)
    assert result["producers"] == 2


def test_produce_text_lines_and_consume_reads_it_all_back(bootstrap):
    out = perf(bootstrap, "produce", "--topic", "perf", "--num-records", "200",
               "--record-size", "10", "--compression", "lz4")
    assert out.returncode == 0, out.stderr
    assert re.fullmatch(
        r"200 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
        r"[\d.]+ ms max latency, [\d.]+ ms 50th, [\d.]+ ms 95th, [\d.]+ ms 99th, "
        r"[\d.]+ ms 99.9th.\n", out.stdout)
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic("perf-consume", 2, 1)])
    assert perf(bootstrap, "produce", "--topic", "perf-consume", "--num-records", "500",
                "--record-size", "32").returncode == 0
    out = perf(bootstrap, "consume", "--topic", "perf-consume", "--num-records", "500", "--json",
               "--timeout", "5000")
    assert out.returncode == 0, out.stderr
    result = json_lines(out.stdout)[-1]
    assert result["type"] == "result"
    assert (result["records"], result["bytes"]) == (500, 500 * 32)
    assert result["records_per_s"] == pytest.approx(500 / result["elapsed_s"])


def test_consume_reports_a_shortfall(bootstrap):
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic("perf-short", 1, 1)])
    out = perf(bootstrap, "consume", "--topic", "perf-short", "--num-records", "10",
               "--timeout", "300", "--json")
    assert out.returncode == 1
    assert json_lines(out.stdout)[-1]["records"] == 0
    assert "only 0 of 10 records arrived" in out.stderr


def test_ctrl_c_ends_the_sends_and_still_prints_the_summary(bootstrap):
    # #31: Ctrl-C printed only "Aborted!". Now the first SIGINT ends the sends, flushes what
    # was sent and prints the result (the JSON result line here), exit 130.
    proc = subprocess.Popen([*RAFTKA, "perf", "produce", "--topic", "perf", "--num-records", "10000000",
                             "--record-size", "100", "--throughput", "2000", "--reporting-interval", "50",
                             "--json", "--bootstrap-server", bootstrap],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=raftka_env())
    try:
        first = json.loads(proc.stdout.readline())  # a window: records are being acknowledged
        assert first["type"] == "window" and first["records"] > 0
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    result = json_lines(out)[-1]
    assert result["type"] == "result" and 0 < result["records"] < 10_000_000 and result["errors"] == 0
    assert re.search(r"interrupted after [\d,]+ of 10,000,000 records", err), err
    assert "Aborted" not in err
