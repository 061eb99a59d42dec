"""The transactional chaos checker (chaos/txn_checker.py): one history per anomaly."""

from __future__ import annotations

import pytest

from raftka.chaos.history import op
from raftka.chaos.txn_checker import TXN_ANOMALIES, check


def txn(process, writes, intent="commit", end="ok", f="txn"):
    value = {"writes": [list(w) for w in writes], "intent": intent}
    return [op(process, "invoke", f, value), op(process, end, f, value)]


def read(process, topic, records, f="txn-poll"):
    return [op(process, "ok", f, {"topic": topic, "records": [list(r) for r in records]})]


def drain(topic, records):
    return read("drain", topic, records, f="txn-drain")


def send(value, partition=0, offset=0):
    return [op(9, "invoke", "send", value, partition), op(9, "ok", "send", value, partition, offset)]


GOOD = (txn(1, [(0, 1), (1, 2)]) + txn(1, [(0, 3)], intent="abort") + txn(2, [(1, 4)], end="info")
        + read(5, "txn", [(0, 0, 1)]) + read(5, "txn", [(1, 0, 2)])
        + drain("txn", [(0, 0, 1), (1, 0, 2)]))

# (name, history, the anomalies it must show)
CASES = [
    ("valid", GOOD, set()),
    ("aborted read in a poll", GOOD + read(5, "txn", [(0, 2, 3)]), {"G1a"}),
    ("aborted read of a failed commit", txn(1, [(0, 1)], end="fail")
     + drain("txn", [(0, 0, 1)]), {"G1a"}),
    ("lost committed write", txn(1, [(0, 1), (1, 2)]) + drain("txn", [(0, 0, 1)]),
     {"lost-write", "non-atomic"}),
    ("unknown outcome seen in part", txn(1, [(0, 1), (1, 2)], end="info")
     + drain("txn", [(1, 0, 2)]), {"non-atomic"}),
    ("unknown outcome seen whole", txn(1, [(0, 1), (1, 2)], end="info")
     + drain("txn", [(1, 0, 2), (0, 0, 1)]), set()),
    ("poll goes backwards", txn(1, [(0, 1), (0, 2)]) + read(5, "txn", [(0, 0, 1), (0, 1, 2)])
     + read(5, "txn", [(0, 0, 1)]) + drain("txn", [(0, 0, 1), (0, 1, 2)]), {"nonmonotonic"}),
    ("txn reordered in the log", txn(1, [(0, 1), (0, 2)]) + drain("txn", [(0, 0, 2), (0, 1, 1)]),
     {"nonmonotonic"}),
    ("duplicate", txn(1, [(0, 1)]) + drain("txn", [(0, 0, 1), (0, 1, 1)]), {"duplicate"}),
    ("unexpected", drain("txn", [(0, 0, 77)]), {"unexpected"}),
    ("exactly once", send(10) + send(11, 0, 1) + txn(3, [(0, 10), (0, 11)], f="ctp")
     + drain("in", [(0, 0, 10), (0, 1, 11)]) + drain("out", [(0, 0, 10), (0, 1, 11)]), set()),
    ("input never transformed", send(10) + send(11, 0, 1) + txn(3, [(0, 10)], f="ctp")
     + drain("in", [(0, 0, 10), (0, 1, 11)]) + drain("out", [(0, 0, 10)]), {"ctp-missing"}),
    ("input transformed twice", send(10) + txn(3, [(0, 10)], f="ctp")
     + txn(4, [(0, 10)], f="ctp", end="info")
     + drain("in", [(0, 0, 10)]) + drain("out", [(0, 0, 10), (0, 1, 10)]),
     {"ctp-duplicate", "duplicate"}),
]


@pytest.mark.parametrize("name,history,expected", CASES, ids=[c[0] for c in CASES])
def test_anomalies(name: str, history: list, expected: set[str]) -> None:
    result = check(history)
    found = {k for k, v in result.anomalies.items() if v}
    assert found == expected, result.anomalies
    assert result.valid is (not expected)
    assert set(result.failed()) == expected
    assert set(result.anomalies) == set(TXN_ANOMALIES)
