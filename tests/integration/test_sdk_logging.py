"""The SDK is silent by default and logs through stdlib logging; the CLI honours RAFTKA_LOG_LEVEL.

Each check runs a fresh Python process, as an application would, against a real one-node server.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.integration.sdk_broker import RAFTKA, REPO, one_node_server, raftka_env

APP = """
import sys
from raftka import Admin, Consumer, NewTopic, Producer, TopicPartition
bootstrap, topic = sys.argv[1], sys.argv[2]
with Admin(bootstrap) as admin:
    admin.create_topics([NewTopic(topic, 1, 1)])
with Producer(bootstrap) as producer:
    producer.send(topic, b"v").result(timeout=30)
with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
    consumer.assign([TopicPartition(topic, 0)])
    got = []
    while not got:
        got = [r for rs in consumer.poll(1000).values() for r in rs]
"""


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with one_node_server(tmp_path_factory.mktemp("sdk-logging")) as address:
        yield address


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in raftka_env().items() if k != "RAFTKA_LOG_LEVEL"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)


def test_importing_and_using_the_sdk_prints_nothing(bootstrap: str) -> None:
    ran = _python(APP, bootstrap, "quiet")
    assert ran.returncode == 0, ran.stderr
    assert (ran.stdout, ran.stderr) == ("", "")


def test_the_sdk_logs_through_stdlib_logging_when_the_app_asks(bootstrap: str) -> None:
    ran = _python("import logging; logging.basicConfig(level=logging.DEBUG)\n" + APP, bootstrap, "logged")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == ""
    assert "DEBUG:raftka.client.connection:connection.negotiated broker=" in ran.stderr


@pytest.mark.parametrize(("level", "shown"), [("DEBUG", True), ("INFO", False)])
def test_raftka_log_level_reaches_the_sdk_in_the_cli(bootstrap: str, level: str, shown: bool) -> None:
    ran = subprocess.run([*RAFTKA, "topics", "list", "--bootstrap-server", bootstrap],
                         capture_output=True, text=True, env={**raftka_env(), "RAFTKA_LOG_LEVEL": level},
                         timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ("connection.negotiated" in ran.stderr) is shown
    assert "connection.negotiated" not in ran.stdout
