"""DescribeCluster v2 (KIP-1073) on a real three-node cluster: a killed broker is fenced, then
left out of the answer unless the request includes fenced brokers, where it is marked."""

from __future__ import annotations

import pytest

from raftka.client.protocol import ApiKey
from tests.compat.wire_client import WireConnection
from tests.integration.cluster_support import running_cluster
from tests.support import wait_until

pytestmark = pytest.mark.timeout(120)


def _brokers(bootstrap: str, version: int, include_fenced: bool) -> dict[int, bool]:
    with WireConnection(bootstrap) as conn:
        answer = conn.request(ApiKey.DESCRIBE_CLUSTER, version, {
            "include_cluster_authorized_operations": False, "endpoint_type": 1,
            "include_fenced_brokers": include_fenced})
    assert answer.error_code == 0
    return {b.broker_id: b.is_fenced for b in answer.brokers}


def test_fenced_brokers_only_when_asked(tmp_path) -> None:
    with running_cluster(tmp_path) as cluster:
        first = next(iter(cluster.nodes.values())).bootstrap
        with WireConnection(first) as conn:
            controller = conn.request(ApiKey.DESCRIBE_CLUSTER, 2, {}).controller_id
        victim = max(set(cluster.nodes) - {controller})
        survivor = next(n.bootstrap for i, n in cluster.nodes.items() if i != victim)
        assert _brokers(survivor, 2, True) == dict.fromkeys(cluster.nodes, False)
        cluster.kill(victim)
        wait_until(lambda: victim not in _brokers(survivor, 2, False), timeout=30, interval=0.2,
                   what=f"broker {victim} fenced")
        assert _brokers(survivor, 2, True) == {**dict.fromkeys(cluster.nodes, False), victim: True}
        assert victim not in _brokers(survivor, 1, True)  # v1 has no such field: live brokers only
