"""ApiVersions advertises exactly what the broker serves: every advertised (API, version)
is decodable by the codec, has a handler, and gets an answer from a real broker — and a
Produce at every advertised version stores its batch (Produce v0-2 used to be advertised
and then refused with UNSUPPORTED_VERSION)."""

from __future__ import annotations

import pytest

from raftka.broker.kafka_apis import HANDLERS
from raftka.client.protocol import ADVERTISED_VERSIONS, ApiKey
from raftka.client.protocol.messages import REQUEST_CODECS, RESPONSE_CODECS
from tests.compat.wire_client import WireConnection, values_batch

ADVERTISED = [(key, version) for key, (low, high) in ADVERTISED_VERSIONS.items()
              for version in range(low, high + 1)]


def test_every_advertised_version_is_declared_and_has_a_handler() -> None:
    missing = [(key.name, v) for key, v in ADVERTISED
               if key not in HANDLERS or v not in REQUEST_CODECS[key].versions
               or v not in RESPONSE_CODECS[key].versions]
    assert not missing, f"advertised but not served: {missing}"


# Requests whose all-defaults body would not get an answer (acks=0) or would wait.
BODIES = {
    ApiKey.PRODUCE: {"acks": -1, "timeout_ms": 15000, "topic_data": []},
    ApiKey.FETCH: {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                   "session_epoch": -1, "topics": []},
    ApiKey.JOIN_GROUP: {"group_id": "", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                        "member_id": "", "protocol_type": "consumer", "protocols": []},
}


def test_every_advertised_version_is_answered(bootstrap: str) -> None:
    """An all-defaults request of every advertised version gets a decodable answer on the
    same connection (an unserved version would close it)."""
    with WireConnection(bootstrap) as conn:
        for key, version in ADVERTISED:
            try:
                conn.request(key, version, BODIES.get(key, {}))
            except Exception as exc:  # noqa: BLE001 - name the version that failed
                pytest.fail(f"{key.name} v{version}: {exc!r}")


@pytest.mark.parametrize("version", range(ADVERTISED_VERSIONS[ApiKey.PRODUCE][0],
                                          ADVERTISED_VERSIONS[ApiKey.PRODUCE][1] + 1))
def test_every_advertised_produce_version_stores_the_batch(bootstrap: str, version: int) -> None:
    topic = "x-advertised-produce"
    with WireConnection(bootstrap) as conn:
        assert conn.create_topic(topic) in (0, 36)  # 36: created by another version's run
        result = conn.produce(topic, 0, values_batch([b"v%d" % version]), version=version)
        assert result.error_code == 0, f"Produce v{version} answered error {result.error_code}"
