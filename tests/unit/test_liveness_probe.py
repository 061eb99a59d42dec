"""The controller's liveness probe: which brokers to probe (pure), and the probe on real sockets."""

from __future__ import annotations

import socket

import pytest
import trio

from raftka.raft_meta.controller import controller_decisions as cd
from raftka.raft_meta.metadata.apply import replay
from raftka.raft_meta.metadata.records import (
    FenceBroker,
    Partition,
    PartitionChange,
    RegisterBroker,
    Topic,
    UnfenceBroker,
)
from raftka.raft_meta.quorum.liveness_probe import Reachability, probe_endpoint, probe_listeners
from tests.support import free_port

L = (("PLAINTEXT", "h", 1),)
T = "tid"


def three_brokers(*extra):
    """Brokers 1..3 registered (epochs 1..3) and unfenced, broker 3 then fenced, then `extra`."""
    records = [RegisterBroker(b, f"inc{b}", L, None) for b in (1, 2, 3)]
    records += [UnfenceBroker(b, b) for b in (1, 2, 3)] + [FenceBroker(3, 3), *extra]
    return replay(list(enumerate(records, start=1)))


# (name, last_heard, hinted, last_probe, in_flight, now, expected); quiet after 3 s, gap 0.2 s.
PROBE_CASES = [
    ("a new controller probes every live broker it has not heard from", {}, set(), {}, set(), 100.0, [1, 2]),
    ("heard recently: nothing to probe", {1: 99.0, 2: 98.0}, set(), {}, set(), 100.0, []),
    ("quiet for longer than 1.5 heartbeats", {1: 99.0, 2: 96.5}, set(), {}, set(), 100.0, [2]),
    ("a quiet broker is probed once per quiet period", {1: 99.0, 2: 90.0}, set(), {2: 98.0}, set(), 100.0, []),
    ("... and again after it", {1: 99.0, 2: 90.0}, set(), {2: 96.9}, set(), 100.0, [2]),
    ("a lost connection is probed at once", {1: 99.9, 2: 99.9}, {1}, {}, set(), 100.0, [1]),
    ("hints are rate-limited", {1: 99.9, 2: 99.9}, {1}, {1: 99.9}, set(), 100.0, []),
    ("... to one per gap", {1: 99.9, 2: 99.9}, {1}, {1: 99.8}, set(), 100.0, [1]),
    ("never two probes of one broker", {}, {1}, {}, {1}, 100.0, [2]),
    ("fenced brokers are never probed", {1: 99.9, 2: 99.9}, {3}, {}, set(), 100.0, []),
    ("unregistered ids are never probed", {1: 99.9, 2: 99.9}, {7}, {}, set(), 100.0, []),
]


@pytest.mark.parametrize("name,heard,hinted,last_probe,in_flight,now,expected", PROBE_CASES,
                         ids=[c[0] for c in PROBE_CASES])
def test_brokers_to_probe(name, heard, hinted, last_probe, in_flight, now, expected) -> None:
    assert cd.brokers_to_probe(three_brokers(), heard, hinted, last_probe, in_flight, now,
                               quiet_after_s=3.0, min_gap_s=0.2) == expected


def test_fence_gone_broker_fences_like_a_session_expiry() -> None:
    image = three_brokers(Topic("t", T), Partition(T, 0, (1, 2), (1, 2), 1))
    decision = cd.fence_gone_broker(image, 1, 1, False)
    assert decision == cd.fence_broker(image, 1, False)
    assert decision.records == (FenceBroker(1, 1), PartitionChange(T, 0, 0, leader=2, isr=(2,)))


def test_fence_gone_broker_spares_a_new_incarnation_and_fenced_or_unknown_brokers() -> None:
    image = three_brokers(RegisterBroker(2, "inc2b", L, None), UnfenceBroker(2, 8))
    assert image.brokers[2].epoch == 8 and not image.brokers[2].fenced
    assert cd.fence_gone_broker(image, 2, 2, False).records == ()  # the probe saw the old incarnation
    assert cd.fence_gone_broker(image, 3, 3, False).records == ()  # already fenced
    assert cd.fence_gone_broker(image, 9, 1, False).records == ()  # never registered
    assert cd.fence_gone_broker(image, 2, 8, False).records[0] == FenceBroker(2, 8)


# --- the probe on real sockets ---------------------------------------------------


async def test_refused_port_proves_the_process_gone() -> None:
    port = free_port()  # bound and released: nothing listens there now
    assert await probe_endpoint("127.0.0.1", port, 2.0) is Reachability.REFUSED
    assert await probe_listeners([("PLAINTEXT", "127.0.0.1", port)], 2.0) is Reachability.REFUSED


async def test_listening_port_that_never_accepts_counts_as_alive() -> None:
    # A SIGSTOPped broker: its socket listens but the process never calls accept().
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        assert await probe_endpoint("127.0.0.1", port, 2.0) is Reachability.LISTENING
        assert await probe_endpoint("localhost", port, 2.0) is Reachability.LISTENING  # ::1 may refuse; v4 accepts


async def test_full_backlog_times_out_within_the_deadline_and_proves_nothing() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        # Each probe's connection stays queued (never accepted); once the queue is full the
        # kernel drops SYNs and a connect hangs until the probe's deadline.
        outcomes = []
        for _ in range(16):
            start = trio.current_time()
            outcomes.append(await probe_endpoint("127.0.0.1", port, 0.3))
            if outcomes[-1] is not Reachability.LISTENING:
                break
        assert outcomes[0] is Reachability.LISTENING
        assert outcomes[-1] is Reachability.UNKNOWN, outcomes
        assert trio.current_time() - start < 2.0


async def test_wildcard_and_unresolvable_hosts_prove_nothing() -> None:
    port = free_port()
    assert await probe_endpoint("0.0.0.0", port, 1.0) is Reachability.UNKNOWN
    assert await probe_endpoint("", port, 1.0) is Reachability.UNKNOWN
    assert await probe_endpoint("no-such-host.invalid", port, 2.0) is Reachability.UNKNOWN


async def test_a_broker_is_gone_only_if_every_listener_refuses() -> None:
    refused = free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        alive = listener.getsockname()[1]
        both = [("PLAINTEXT", "127.0.0.1", refused), ("INTERNAL", "127.0.0.1", alive)]
        assert await probe_listeners(both, 1.0) is Reachability.LISTENING
        mixed = [("PLAINTEXT", "127.0.0.1", refused), ("INTERNAL", "0.0.0.0", refused)]
        assert await probe_listeners(mixed, 1.0) is Reachability.UNKNOWN
    assert await probe_listeners([], 1.0) is Reachability.UNKNOWN
