"""The client-quota meter and throttle of broker/client_quotas.py: Kafka's Rate (padded to
quota.window.num - 1 windows), QuotaUtils.throttleTime, and the shared sensors (tables)."""

from __future__ import annotations

import pytest

from raftka.broker.client_quotas import (
    ClientQuotaManager,
    ClientQuotas,
    QuotaRate,
    throttle_time_ms,
    user_of,
)

RATE_CASES = [
    # samples, window, [(time, bytes)], now, expected rate
    (11, 1.0, [(0.0, 1000)], 0.0, 100.0),  # padded to 10 windows
    (11, 1.0, [(0.0, 1000)], 5.5, 1000 / 10.5),  # 5.5 s elapsed = 5 whole windows, padded by 5 more
    (11, 1.0, [(0.0, 1000), (10.5, 1000)], 10.5, 2000 / 10.5),  # no padding past 10 windows
    (11, 1.0, [(0.0, 1000), (11.5, 500)], 11.5, 500 / 10.0),  # the sample of t=0 expired (11 windows)
    (2, 1.0, [(0.0, 100), (0.5, 100), (1.2, 100)], 1.2, 300 / 1.2),
    (2, 1.0, [], 3.0, 0.0),
]


@pytest.mark.parametrize(("samples", "window", "events", "now", "expected"), RATE_CASES)
def test_rate_is_kafkas(samples, window, events, now, expected):
    rate = QuotaRate(samples, window)
    for t, n in events:
        rate.record(n, t)
    assert rate.rate(now) == pytest.approx(expected)


THROTTLE_CASES = [
    # bound, bytes at t=0, expected throttle ms (samples 11, window 1 s, cap 11 s)
    (100.0, 1000, 0),  # exactly at the bound: rate 100
    (50.0, 1000, 10000),  # (100 - 50) / 50 * 10 s
    (80.0, 1000, 2500),
    (1.0, 10**6, 11000),  # capped at the whole sampled window
]


@pytest.mark.parametrize(("bound", "nbytes", "expected"), THROTTLE_CASES)
def test_throttle_time(bound, nbytes, expected):
    rate = QuotaRate(11, 1.0)
    rate.record(nbytes, 0.0)
    assert throttle_time_ms(rate, bound, 0.0, 11000.0) == expected


ALICE = (("user", "alice"),)
P1 = (("client-id", "p1"),)


def test_sensors_are_shared_as_the_quota_applies_and_recorded_only_with_quotas():
    produce = ClientQuotaManager("producer_byte_rate", "Produce")
    assert produce.record({}, "alice", "p1", 10**9, 0.0) == 0 and not produce.sensors  # no quotas: off
    quotas = {ALICE: {"producer_byte_rate": 100.0}, P1: {"consumer_byte_rate": 1.0}}
    assert produce.record(quotas, "alice", "p1", 500, 0.0) == 0  # 50 B/s over the padded window
    assert produce.record(quotas, "alice", "p2", 700, 0.1) > 0  # the same user-level sensor: 120 B/s
    assert set(produce.sensors) == {("alice", "")}
    assert produce.record(quotas, "bob", "p1", 10**6, 0.2) == 0  # no producer quota for bob: unlimited
    assert produce.sensors[("", "p1")].bound is None
    sensor = produce.sensors[("alice", "")]
    assert (sensor.bytes_total, sensor.throttled) == (1200, 1) and sensor.throttle_ms_total > 0
    assert sensor.throttle_time_avg(0.2) == sensor.throttle_ms_total  # Kafka's throttle-time: an Avg
    assert sensor.throttle_time_avg(20.0) == 0.0  # ... over the windows: gone once they expire
    assert [s[:2] for s in produce.samples_now(0.2)] == [("", "p1"), ("alice", "")]


def test_idle_sensors_expire_after_an_hour():
    produce = ClientQuotas.create().produce
    quotas = {ALICE: {"producer_byte_rate": 100.0}}
    produce.record(quotas, "alice", "p1", 1, 0.0)
    produce.record(quotas, "bob", "p1", 1, 3599.0)
    produce.record(quotas, "bob", "p1", 1, 3700.0)  # looked at once a minute
    assert set(produce.sensors) == {("", "p1")}


@pytest.mark.parametrize(("principal", "user"), [("User:alice", "alice"), ("User:ANONYMOUS", "ANONYMOUS"),
                                                 ("User:CN=a,O=b", "CN=a,O=b")])
def test_user_of(principal, user):
    assert user_of(principal) == user


IP_RATE_CASES = [
    ({(("ip", "10.0.0.1"),): 5.0, (("ip", None),): 2.0}, "10.0.0.1", 5.0),
    ({(("ip", "10.0.0.1"),): 5.0, (("ip", None),): 2.0}, "10.0.0.2", 2.0),
    ({(("ip", "10.0.0.1"),): 5.0}, "10.0.0.2", None),
]


@pytest.mark.parametrize(("quotas", "ip", "expected"), IP_RATE_CASES)
def test_ip_connection_rate_lookup(quotas, ip, expected):
    from raftka.raft_meta.controller.quota_decisions import ip_connection_rate

    image_quotas = {entity: {"connection_creation_rate": v} for entity, v in quotas.items()}
    assert ip_connection_rate(image_quotas, ip) == expected


def test_connection_creation_rate_throttles_the_connection_over_it():
    from raftka.broker.net.connection_quotas import ConnectionLimits, ConnectionQuotas

    quotas = ConnectionQuotas(ConnectionLimits())
    assert quotas.creation_throttle_ms("10.0.0.1", 0.0) == 0  # no quota: nothing counted
    quotas.ip_rate = lambda ip: 1.0 if ip == "10.0.0.1" else None
    # Kafka's Rate pads the window to 10 s: ten connections at once are 1/s, the eleventh 1.1/s
    assert [quotas.creation_throttle_ms("10.0.0.1", 0.1) for _ in range(11)] == [0] * 10 + [1000]
    assert quotas.creation_throttle_ms("10.0.0.2", 0.1) == 0


def test_unrecord_takes_an_unsent_answer_back_off_the_meter():
    fetch = ClientQuotas.create().fetch
    quotas = {P1: {"consumer_byte_rate": 100.0}}
    assert fetch.record(quotas, "bob", "p1", 2000, 0.0) > 0  # 200 B/s over the padded window
    fetch.unrecord(quotas, "bob", "p1", 2000, 0.0)
    assert fetch.sensors[("", "p1")].rate.rate(0.0) == 0.0
    assert fetch.record(quotas, "bob", "p1", 900, 0.5) == 0  # as if the first had never been
