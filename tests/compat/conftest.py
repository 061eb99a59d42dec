"""Fixtures for the compatibility tests: one real raftka server process for the package.

Every test uses its own topic names (cf-*, kp-*, x-*), so the tests share one server.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.compat.server_process import ServerProcess, running_server

# The broker default the "-1 means broker default" admin tests expect.
DEFAULT_PARTITIONS = 3


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("compat-broker"),
                        num_partitions=DEFAULT_PARTITIONS) as process:
        yield process


@pytest.fixture(scope="package")
def bootstrap(server: ServerProcess) -> str:
    return server.bootstrap


@pytest.fixture(scope="module")
def kafka_python_codecs() -> Iterator[None]:
    """kafka-python's snappy and lz4 codecs, which need packages raftka does not install,
    backed by pyarrow's reference C libraries for the whole module (see tests/unit)."""
    from tests.unit.kafka_python_codecs import pyarrow_backed_kafka_codecs

    with pyarrow_backed_kafka_codecs():
        yield
