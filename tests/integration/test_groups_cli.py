"""`raftka groups reset-offsets` and `groups describe` of a missing group, as real processes
against a real one-node server, checked through a real group consumer (the SDK's)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from raftka import Consumer, TopicPartition
from tests.integration.sdk_broker import RAFTKA, one_node_server, raftka_env
from tests.support import wait_until


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with one_node_server(tmp_path_factory.mktemp("groups-cli")) as address:
        yield address


def raftka(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAFTKA, *args], input=stdin, capture_output=True, text=True,
                          env=raftka_env(), timeout=60)


def committed(bootstrap: str, group: str, tp: TopicPartition) -> int | None:
    with Consumer(bootstrap, group_id=group) as consumer:
        return consumer.committed(tp)


def test_reset_offsets(bootstrap: str) -> None:
    b = ["--bootstrap-server", bootstrap]
    assert raftka("topics", "create", "--topic", "resets", "--partitions", "1", *b).returncode == 0
    assert raftka("produce", "--topic", "resets", *b, stdin="".join(f"{i}\n" for i in range(10))
                  ).returncode == 0
    done = raftka("consume", "--topic", "resets", "--group", "rg", "--from-beginning",
                  "--max-messages", "10", *b)
    assert done.returncode == 0, done.stderr
    tp = TopicPartition("resets", 0)
    assert committed(bootstrap, "rg", tp) == 10

    dry = raftka("groups", "reset-offsets", "--group", "rg", "--topic", "resets", "--shift-by", "-3", *b)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET", "rg", "resets", "0", "7"]
    assert "dry run" in dry.stderr and committed(bootstrap, "rg", tp) == 10

    for args, expected in ((["--shift-by", "-3"], 7), (["--to-earliest"], 0), (["--to-offset", "99"], 10),
                           (["--to-offset", "4"], 4), (["--to-latest"], 10),
                           (["--to-datetime", "2000-01-01T00:00:00"], 0)):
        ran = raftka("groups", "reset-offsets", "--group", "rg", "--topic", "resets:0", *args, "--execute", *b)
        assert ran.returncode == 0, (args, ran.stderr)
        assert committed(bootstrap, "rg", tp) == expected, args
    resumed = raftka("consume", "--topic", "resets", "--group", "rg", "--max-messages", "1", *b)
    assert resumed.stdout.splitlines() == ["0"]

    bad = raftka("groups", "reset-offsets", "--group", "rg", "--topic", "resets", *b)
    assert bad.returncode == 2 and "give exactly one of --to-earliest" in bad.stderr


def test_reset_offsets_refuses_an_active_group(bootstrap: str) -> None:
    b = ["--bootstrap-server", bootstrap]
    assert raftka("topics", "create", "--topic", "busy", "--partitions", "1", *b).returncode == 0
    with Consumer(bootstrap, group_id="active-g") as member:
        member.subscribe(["busy"])
        wait_until(lambda: (member.poll(100), member.assignment())[1], timeout=60,
                   what="the member's assignment")
        ran = raftka("groups", "reset-offsets", "--group", "active-g", "--topic", "busy",
                     "--to-earliest", "--execute", *b)
    assert ran.returncode == 1
    assert "can only be reset if the group 'active-g' is inactive, but the current state is Stable" in ran.stderr


def test_describe_a_missing_group_is_an_error(bootstrap: str) -> None:
    ran = raftka("groups", "describe", "--group", "no-such-group", "--bootstrap-server", bootstrap)
    assert ran.returncode == 1
    assert "consumer group 'no-such-group' does not exist" in ran.stderr
    assert ran.stdout == ""


def test_describe_a_group_being_migrated_shows_each_members_type_and_epochs(bootstrap: str) -> None:
    """A consumer group with a classic member and a consumer-protocol member (an online upgrade
    under way): `groups describe` shows what kafka-consumer-groups --describe --members --verbose
    and --state --verbose show for it: each member's epoch, current and target assignment,
    whether it is UPGRADED (speaks the consumer protocol), the group and assignment epochs and
    the coordinator."""
    from tests.compat.migration_cases import mixed

    b = ["--bootstrap-server", bootstrap]
    assert raftka("topics", "create", "--topic", "mixed-t", "--partitions", "2", *b).returncode == 0
    assert mixed(bootstrap, "mixed-g", "mixed-t", "mixed-consumer-member-0") == "joined: " + " ".join(["NONE"] * 6)
    ran = raftka("groups", "describe", "--group", "mixed-g", *b)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    host, port = bootstrap.split(":")
    assert lines[0].split() == ["GROUP", "mixed-g", "STATE", "Stable", "PROTOCOL", "uniform", "MEMBERS", "2",
                                "GROUP-EPOCH", "2", "ASSIGNMENT-EPOCH", "2", "COORDINATOR", f"{host}:{port}", "(1)"]
    header = next(line.split() for line in lines if line.startswith("CONSUMER-ID"))
    assert header[4:] == ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT", "SUBSCRIPTION",
                          "UPGRADED"]
    rows = [line.split() for line in lines[lines.index(next(x for x in lines if x.startswith("CONSUMER-ID"))) + 1:]]
    by_type = {row[-1]: row for row in rows}
    assert sorted(by_type) == ["false", "true"], ran.stdout
    assert by_type["true"][0] == "mixed-consumer-member-0"
    # Each holds one partition at the group epoch; its target is what it holds.
    for row in rows:
        assert row[3:5] == ["1", "2"] and row[5] == row[7] and row[6] == "2" and row[8] == "mixed-t", ran.stdout
    assert {by_type["true"][5], by_type["false"][5]} == {"mixed-t:0", "mixed-t:1"}
