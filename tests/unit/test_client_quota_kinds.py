"""request_percentage and controller_mutation_rate (broker/client_quotas.py): Kafka's
TokenBucket and Strict- / PermissiveControllerMutationQuota, the request quota's one-window
throttle cap, the per-type `quotasEnabled`, and the request timer (tables and scenarios)."""

from __future__ import annotations

import pytest
import trio

from raftka.broker.client_quotas import (
    STRICT_MUTATION_VERSIONS,
    ClientQuotas,
    RequestTimer,
    TokenBucket,
)
from raftka.raft_meta.controller.quota_decisions import (
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
)

CLIENT = (("client-id", "adm"),)

BUCKET_CASES = [
    # rate, samples, window, [(time, take)], now, expected tokens, expected throttle ms
    (2.0, 11, 1.0, [], 0.0, 22.0, 0),  # starts full: samples x window x rate
    (2.0, 11, 1.0, [(0.0, 30)], 0.0, -8.0, 4000),  # below zero: -tokens / rate
    (2.0, 11, 1.0, [(0.0, 30)], 3.0, -2.0, 1000),  # refilled at the rate
    (2.0, 11, 1.0, [(0.0, 30)], 4.0, 0.0, 0),
    (2.0, 11, 1.0, [(0.0, 30)], 100.0, 22.0, 0),  # never above the burst
    (1.0, 3, 2.0, [(0.0, 5), (1.0, 5)], 1.0, -3.0, 3000),
]


@pytest.mark.parametrize(("rate", "samples", "window", "takes", "now", "tokens", "throttle"), BUCKET_CASES)
def test_token_bucket_is_kafkas(rate, samples, window, takes, now, tokens, throttle):
    bucket = TokenBucket(rate, samples, window, 0.0)
    for t, value in takes:
        bucket.take(value, t)
    assert bucket.level(now) == pytest.approx(tokens)
    assert bucket.throttle_ms(now) == throttle


def _mutations(rate: float = 2.0) -> tuple[ClientQuotas, dict]:
    return ClientQuotas.create(), {CLIENT: {CONTROLLER_MUTATION_RATE: rate}}


def test_a_strict_quota_takes_what_is_asked_until_the_bucket_is_below_zero_then_refuses():
    quotas, image = _mutations()
    quota = quotas.mutation.mutation_quota(image, "", "adm", True, 0.0)
    assert quota.record(30, 0.0)  # 22 tokens: accepted all the same, now -8
    assert quota.throttle_time_ms(0.0) == 0  # an accepted mutation is not throttled
    assert not quota.record(1, 0.0)  # THROTTLING_QUOTA_EXCEEDED
    assert quota.throttle_time_ms(0.0) == 4000
    assert quota.throttle_time_ms(1.5) == 2500  # less the time since (a slow request)
    later = quotas.mutation.mutation_quota(image, "", "adm", True, 4.0)
    assert later.record(1, 4.0)  # back at zero: accepted


def test_a_permissive_quota_accepts_everything_and_throttles_for_the_overdraft():
    quotas, image = _mutations()
    quota = quotas.mutation.mutation_quota(image, "", "adm", False, 0.0)
    assert quota.record(20, 0.0) and quota.throttle_time_ms(0.0) == 0
    assert quota.record(10, 0.0) and quota.throttle_time_ms(0.0) == 4000
    assert quota.record(10, 0.0) and quota.throttle_time_ms(0.0) == 9000
    assert quotas.mutation.tokens_now(0.0) == [("", "adm", -18.0)]  # the metric's `tokens`
    assert quotas.mutation.samples_now(0.0)[0][2] == pytest.approx(40 / 10)  # mutation-rate, padded windows


def test_connections_of_one_entity_share_its_bucket():
    quotas, image = _mutations()
    assert quotas.mutation.mutation_quota(image, "alice", "adm", True, 0.0).record(23, 0.0)
    assert not quotas.mutation.mutation_quota(image, "bob", "adm", True, 0.0).record(1, 0.0)


@pytest.mark.parametrize("image", [
    {},  # no quota at all
    {CLIENT: {PRODUCER_BYTE_RATE: 10.0}},  # quotas, none of this type
    {(("client-id", "other"),): {CONTROLLER_MUTATION_RATE: 1.0}},  # none for this connection
])
def test_without_a_mutation_quota_that_applies_nothing_is_refused_or_throttled(image):
    quotas = ClientQuotas.create()
    quota = quotas.mutation.mutation_quota(image, "", "adm", True, 0.0)
    assert all(quota.record(1000, 0.0) for _ in range(3))
    assert quota.throttle_time_ms(0.0) == 0


def test_a_changed_rate_applies_to_the_bucket_it_already_has():
    quotas, image = _mutations(2.0)
    assert quotas.mutation.mutation_quota(image, "", "adm", True, 0.0).record(22, 0.0)  # at 0
    faster = {CLIENT: {CONTROLLER_MUTATION_RATE: 10.0}}
    quota = quotas.mutation.mutation_quota(faster, "", "adm", True, 1.0)
    assert quota.sensor.bucket.level(1.0) == pytest.approx(10.0)  # 1 s at the new rate
    assert quota.sensor.bucket.burst == pytest.approx(110.0)
    assert quota.record(11, 1.0) and not quota.record(1, 1.0)
    assert quota.throttle_time_ms(1.0) == 100  # -1 token at 10/s


def test_strict_since_versions_are_kip_599s():
    assert STRICT_MUTATION_VERSIONS == {"CreateTopics": 6, "CreatePartitions": 3, "DeleteTopics": 5}


REQUEST_CASES = [
    # quota (percent), percent-seconds recorded at t=0, expected throttle ms (samples 11, window 1 s)
    (10.0, 100.0, 0),  # rate 100 / 10 windows = 10 %: at the bound
    (10.0, 150.0, 1000),  # (15 - 10) / 10 x 10 s = 5 s, capped at one window
    (10.0, 105.0, 500),  # (10.5 - 10) / 10 x 10 s
]


@pytest.mark.parametrize(("bound", "percent_s", "expected"), REQUEST_CASES)
def test_the_request_quota_throttles_as_kafka_capped_at_one_window(bound, percent_s, expected):
    quotas = ClientQuotas.create()
    image = {CLIENT: {REQUEST_PERCENTAGE: bound}}
    assert quotas.request.record(image, "", "adm", percent_s, 0.0) == expected
    assert quotas.request.cap_ms == 1000.0 and quotas.produce.cap_ms == 11000.0


def test_a_quota_type_is_only_metered_while_some_entity_sets_its_key():
    quotas = ClientQuotas.create()
    produce_only = {CLIENT: {PRODUCER_BYTE_RATE: 10.0}}
    assert quotas.request.record(produce_only, "", "adm", 1e6, 0.0) == 0
    assert quotas.request.sensors == {}
    assert quotas.produce.record(produce_only, "", "adm", 1e6, 0.0) > 0
    both = {CLIENT: {PRODUCER_BYTE_RATE: 10.0, REQUEST_PERCENTAGE: 1.0}}
    assert quotas.request.record(both, "", "adm", 1e6, 0.0) == 1000


def test_the_request_timer_counts_the_tasks_own_steps_not_its_waits():
    """A clock that moves only inside task steps: our task's own step moves it by 30, the other
    task's step (while ours waits) by 50; the timer charges ours exactly 30."""
    now = [0.0]
    timer = RequestTimer(clock=lambda: now[0])
    measured: list[float] = []

    async def main() -> None:
        timer.ensure(True)
        done = trio.Event()

        async def other() -> None:
            now[0] += 50.0  # another task busy while ours waits
            done.set()

        async with trio.open_nursery() as nursery:
            timer.start()
            now[0] += 30.0  # our own work: counts
            nursery.start_soon(other)
            await done.wait()  # waiting (while `other` runs): does not count
            measured.append(timer.stop())
        timer.ensure(False)

    trio.run(main)
    assert measured == [30.0]
    assert timer.busy == {}
