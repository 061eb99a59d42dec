"""`raftka produce|consume` as a user meets them: properties, groups, timestamps, JSON, and
Ctrl-C typed into a real terminal (a pty: the line discipline turns ^C into SIGINT)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import pytest

from raftka import Consumer, TopicPartition
from tests.integration.sdk_broker import RAFTKA, one_node_server, raftka_env
from tests.integration.terminal import Terminal
from tests.support import wait_until


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with one_node_server(tmp_path_factory.mktemp("console-broker")) as address:
        yield address


def raftka(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAFTKA, *args], input=stdin, capture_output=True, text=True,
                          env=raftka_env(), timeout=60)


def end_offset(bootstrap: str, topic: str) -> int:
    with Consumer(bootstrap) as consumer:
        tp = TopicPartition(topic, 0)
        return consumer.end_offsets([tp])[tp]


def test_ctrl_c_stops_interactive_produce_at_once(bootstrap: str) -> None:
    assert raftka("topics", "create", "--topic", "typed", "--bootstrap-server", bootstrap).returncode == 0
    term = Terminal("produce", "--topic", "typed", "--bootstrap-server", bootstrap)
    try:
        term.type(b"one\ntwo\n")
        wait_until(lambda: end_offset(bootstrap, "typed") == 2, timeout=60, what="two records")
        term.type(b"\x03")  # Ctrl-C, with no Enter after it
        wait_until(term.exited, timeout=30, what="raftka produce to exit after Ctrl-C")
    finally:
        term.close()
    assert term.status == 0, term.screen
    assert b"Processed a total of 2 messages" in term.screen
    assert b"Traceback" not in term.screen
    assert end_offset(bootstrap, "typed") == 2  # no extra empty record


def test_ctrl_c_stops_consume_without_a_traceback(bootstrap: str) -> None:
    assert raftka("topics", "create", "--topic", "watched", "--bootstrap-server", bootstrap).returncode == 0
    assert raftka("produce", "--topic", "watched", "--bootstrap-server", bootstrap,
                  stdin="first\nsecond\n").returncode == 0
    term = Terminal("consume", "--topic", "watched", "--from-beginning", "--bootstrap-server", bootstrap)
    try:
        term.shows(b"second")
        term.type(b"\x03")
        wait_until(term.exited, timeout=30, what="raftka consume to exit after Ctrl-C")
    finally:
        term.close()
    assert term.status == 0, term.screen
    assert b"Processed a total of 2 messages" in term.screen
    assert b"Traceback" not in term.screen and b"KeyboardInterrupt" not in term.screen


def test_headers_keys_and_json(bootstrap: str) -> None:
    b = ["--bootstrap-server", bootstrap]
    assert raftka("topics", "create", "--topic", "props", *b).returncode == 0
    produced = raftka("produce", "--topic", "props", "--property", "parse.key=true",
                      "--property", "parse.headers=true", *b,
                      stdin="trace:42,empty\tk1\tv1\n\tk2\tv2\n")
    assert produced.returncode == 0, produced.stderr
    assert "Processed a total of 2 messages" in produced.stderr
    shown = raftka("consume", "--topic", "props", "--from-beginning", "--max-messages", "2",
                   "--property", "print.headers=true", "--property", "print.key=true",
                   "--property", "print.offset=true", *b)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == ["Offset:0\ttrace:42,empty:null\tk1\tv1",
                                         "Offset:1\tNO_HEADERS\tk2\tv2"]
    as_json = raftka("consume", "--topic", "props", "--from-beginning", "--max-messages", "1",
                     "--json", *b)
    assert as_json.returncode == 0, as_json.stderr
    first = json.loads(as_json.stdout.splitlines()[0])
    assert (first["key"], first["value"], first["offset"]) == ("k1", "v1", 0)
    assert first["headers"] == [{"key": "trace", "value": "42"}, {"key": "empty", "value": None}]
    typo = raftka("consume", "--topic", "props", "--property", "print.kye=true", *b)
    assert typo.returncode == 2 and "'print.kye' is not known" in typo.stderr


def test_group_and_timestamp_start(bootstrap: str) -> None:
    b = ["--bootstrap-server", bootstrap]
    assert raftka("topics", "create", "--topic", "grouped", *b).returncode == 0
    assert raftka("produce", "--topic", "grouped", *b, stdin="a\nb\nc\n").returncode == 0
    first = raftka("consume", "--topic", "grouped", "--group", "console-g", "--from-beginning",
                   "--max-messages", "2", *b)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == ["a", "b"]
    # The group committed offset 2: the next member of the group resumes there.
    rest = raftka("consume", "--topic", "grouped", "--group", "console-g", "--max-messages", "1", *b)
    assert rest.returncode == 0, rest.stderr
    assert rest.stdout.splitlines() == ["c"]

    cut = int(time.time() * 1000) + 1
    wait_until(lambda: int(time.time() * 1000) > cut, what="the clock to pass the cut")
    assert raftka("produce", "--topic", "grouped", *b, stdin="d\n").returncode == 0
    later = raftka("consume", "--topic", "grouped", "--from-timestamp", str(cut),
                   "--max-messages", "1", *b)
    assert later.returncode == 0, later.stderr
    assert later.stdout.splitlines() == ["d"]
    iso = raftka("consume", "--topic", "grouped", "--from-timestamp", "2000-01-01T00:00:00Z",
                 "--max-messages", "1", *b)
    assert iso.stdout.splitlines() == ["a"]


def test_a_forgotten_host_is_one_line(bootstrap: str) -> None:
    for args in (["topics", "list"], ["consume", "--topic", "x"], ["groups", "list"],
                 ["produce", "--topic", "x"]):
        ran = raftka(*args, "--bootstrap-server", "9092", stdin="")
        assert ran.returncode == 2, (args, ran.stderr)
        assert "'9092' is not host:port" in ran.stderr
        assert "Traceback" not in ran.stderr and len(ran.stderr.splitlines()) <= 4


def test_a_controller_port_gets_a_hint(bootstrap: str) -> None:
    host, port = bootstrap.rsplit(":", 1)
    for offset in (1, 2):  # LocalCluster: the quorum port, then the controller RPC port
        ran = raftka("topics", "list", "--bootstrap-server", f"{host}:{int(port) + offset}")
        assert ran.returncode == 1
        assert "a Kafka listener?" in ran.stderr and "client port + 1" in ran.stderr
        assert len(ran.stderr.splitlines()) == 1


def test_consume_into_a_closed_pipe_ends_quietly(bootstrap: str) -> None:
    """`raftka consume ... | head -1`: once the reader is gone the consumer stops, no traceback."""
    b = ["--bootstrap-server", bootstrap]
    assert raftka("topics", "create", "--topic", "piped", *b).returncode == 0
    assert raftka("produce", "--topic", "piped", *b, stdin="first\n").returncode == 0
    proc = subprocess.Popen([*RAFTKA, "consume", "--topic", "piped", "--from-beginning", *b],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=raftka_env())
    try:
        assert proc.stdout.readline() == b"first\n"
        proc.stdout.close()  # what `head -1` does after its line
        # The next record's write finds the pipe closed.
        assert raftka("produce", "--topic", "piped", *b, stdin="second\n").returncode == 0
        status = proc.wait(timeout=60)
        stderr = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert status == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr


def test_produce_to_a_new_topic_says_it_was_auto_created(bootstrap: str) -> None:
    # #31: `seq 1 3 | raftka produce --topic demmo` (a typo) silently made a topic.
    b = ["--bootstrap-server", bootstrap]
    first = raftka("produce", "--topic", "demmo", *b, stdin="1\n2\n3\n")
    assert first.returncode == 0, first.stderr
    assert "topic 'demmo' did not exist; the broker created it" in first.stderr
    assert end_offset(bootstrap, "demmo") == 3
    again = raftka("produce", "--topic", "demmo", *b, stdin="4\n")
    assert again.returncode == 0 and "did not exist" not in again.stderr


def test_consume_with_a_share_group_releases_rejects_and_accepts(bootstrap: str) -> None:
    """`raftka consume --share-group` as kafka-console-share-consumer: each record printed is
    acknowledged one by one: --release gives it back (delivered again, its delivery count
    higher), --reject and the default accept settle it. The group config comes from
    `raftka configs alter --entity-type groups`."""
    assert raftka("topics", "create", "--topic", "queued", "--bootstrap-server", bootstrap).returncode == 0
    assert raftka("produce", "--topic", "queued", "--bootstrap-server", bootstrap,
                  stdin="a\nb\nc\nd\n").returncode == 0
    altered = raftka("configs", "alter", "--entity-type", "groups", "--entity-name", "workers",
                     "--add-config", "share.auto.offset.reset=earliest", "--bootstrap-server", bootstrap)
    assert altered.returncode == 0, altered.stderr
    assert "Completed updating config for group workers." in altered.stdout
    described = raftka("configs", "describe", "--entity-type", "groups", "--entity-name", "workers",
                       "--bootstrap-server", bootstrap)
    assert "share.auto.offset.reset=earliest sensitive=false source=GROUP_CONFIG" in described.stdout, described

    def share(*extra: str, count: int) -> list[str]:
        done = raftka("consume", "--topic", "queued", "--share-group", "workers", "--max-messages", str(count),
                      "--timeout-ms", "20000", "--property", "print.delivery=true", "--property", "print.offset=true",
                      "--bootstrap-server", bootstrap, *extra)
        assert done.returncode == 0, done.stderr
        assert f"Processed a total of {count} messages" in done.stderr
        return done.stdout.splitlines()

    assert share("--release", count=4) == ["Offset:0\tDelivery:1\ta", "Offset:1\tDelivery:1\tb",
                                           "Offset:2\tDelivery:1\tc", "Offset:3\tDelivery:1\td"]
    assert share(count=4) == ["Offset:0\tDelivery:2\ta", "Offset:1\tDelivery:2\tb",
                              "Offset:2\tDelivery:2\tc", "Offset:3\tDelivery:2\td"]
    assert raftka("produce", "--topic", "queued", "--bootstrap-server", bootstrap, stdin="e\nf\n").returncode == 0
    assert share("--reject", count=2) == ["Offset:4\tDelivery:1\te", "Offset:5\tDelivery:1\tf"]
    nothing = raftka("consume", "--topic", "queued", "--share-group", "workers", "--timeout-ms", "1500",
                     "--bootstrap-server", bootstrap)
    assert (nothing.returncode, nothing.stdout) == (0, ""), nothing.stderr
    assert "Processed a total of 0 messages" in nothing.stderr


@pytest.mark.parametrize("args", [
    ("--share-group", "g", "--group", "h"), ("--share-group", "g", "--from-beginning"),
    ("--share-group", "g", "--partition", "0"), ("--release",), ("--share-group", "g", "--release", "--reject"),
    ("--group-protocol", "consumer"), ("--share-group", "g", "--isolation-level", "read_committed")])
def test_consume_refuses_share_group_options_that_do_not_fit(bootstrap: str, args: tuple[str, ...]) -> None:
    done = raftka("consume", "--topic", "queued", "--bootstrap-server", bootstrap, *args)
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr


def test_consume_with_a_consumer_protocol_group_commits_its_offsets(bootstrap: str) -> None:
    """`--group-protocol consumer`: the next-generation protocol; the second run starts where
    the first one's commit left the group."""
    assert raftka("topics", "create", "--topic", "kip848", "--bootstrap-server", bootstrap).returncode == 0
    assert raftka("produce", "--topic", "kip848", "--bootstrap-server", bootstrap, stdin="1\n2\n3\n").returncode == 0
    runs = [raftka("consume", "--topic", "kip848", "--group", "g848", "--group-protocol", "consumer",
                   "--from-beginning", "--max-messages", str(n), "--timeout-ms", "20000",
                   "--bootstrap-server", bootstrap) for n in (2, 1)]
    assert [r.stdout.splitlines() for r in runs] == [["1", "2"], ["3"]], [r.stderr for r in runs]
    described = raftka("groups", "describe", "--group", "g848", "--bootstrap-server", bootstrap)
    assert described.returncode == 0 and "consumer" in described.stdout.lower(), described
