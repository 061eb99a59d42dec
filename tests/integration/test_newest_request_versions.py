"""The newest request versions raftka serves, on a real socket to a real `raftka server start`:
each answers as Kafka 4.4 does (the same steps against Kafka itself: tests/differential/wire_steps.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from raftka.client.protocol import ApiKey, ErrorCode
from tests.compat.server_process import ServerProcess, running_server
from tests.compat.wire_client import WireConnection


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("newest-versions")) as process:
        yield process


@pytest.fixture
def conn(server: ServerProcess) -> Iterator[WireConnection]:
    with WireConnection(server.bootstrap) as connection:
        yield connection


def _api_versions_v5(conn: WireConnection, cluster_id: str | None, node_id: int):
    return conn.request(ApiKey.API_VERSIONS, 5, {"client_software_name": "wire-test",
                                                 "client_software_version": "1",
                                                 "cluster_id": cluster_id, "node_id": node_id})


def test_metadata_v13_and_the_api_versions_v5_target_check(conn: WireConnection) -> None:
    metadata = conn.request(ApiKey.METADATA, 13, {"topics": None})
    assert metadata.error_code == 0
    cluster, node = metadata.cluster_id, metadata.brokers[0].node_id
    for cluster_id, node_id, code in ((None, -1, 0), (cluster, node, 0),
                                      ("not-" + cluster, node, ErrorCode.REBOOTSTRAP_REQUIRED),
                                      (cluster, node + 1, ErrorCode.REBOOTSTRAP_REQUIRED),
                                      (cluster, -1, ErrorCode.INVALID_REQUEST),
                                      (None, node, ErrorCode.INVALID_REQUEST)):
        answer = _api_versions_v5(conn, cluster_id, node_id)
        assert answer.error_code == code, (cluster_id, node_id)
        assert bool(answer.api_keys) == (code == 0)
    # REBOOTSTRAP_REQUIRED leaves the connection open, as in Kafka 4.4.
    assert conn.request(ApiKey.METADATA, 13, {"topics": []}).error_code == 0
