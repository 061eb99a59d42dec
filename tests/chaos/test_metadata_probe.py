"""The pure parts of chaos/metadata_probe.py: CRITICAL lines in a node log, convergence."""

from __future__ import annotations

import pytest

from raftka.chaos.metadata_probe import converged, critical_lines


def test_critical_lines_of_stdlib_and_structlog(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(
        '{"event": "quorum.started", "level": "info"}\n'
        "CRITICAL:pysyncobj.syncobj:truncating already-applied log entries from index 399 (last applied: 399)\n"
        "WARNING:pysyncobj.syncobj:CRITICAL is only a word here\n"
        '{"event": "x", "level": "critical"}\n')
    assert list(critical_lines(log)) == [
        "CRITICAL:pysyncobj.syncobj:truncating already-applied log entries from index 399 (last applied: 399)",
        '{"event": "x", "level": "critical"}']
    assert list(critical_lines(tmp_path / "missing.log")) == []


def v(node, offset, digest_offset, digest="d", reachable=True, state=None):
    return {"node_id": node, "reachable": reachable, "image_offset": offset, "image_digest_offset": digest_offset,
            "image_digest": digest, "state": state or ("leader" if node == 1 else "follower")}


@pytest.mark.parametrize(("voters", "expected"), [
    ([v(1, 5, 5), v(2, 5, 5), v(3, 5, 5)], True),
    ([v(1, 5, 5), v(2, 5, 4), v(3, 5, 5)], False),  # a digest still trails its image
    ([v(1, 5, 5), v(2, 6, 6), v(3, 5, 5)], False),  # not one offset yet
    ([v(1, 5, 5), v(2, 5, 5)], False),  # a voter missing
    ([v(1, 5, 5), v(2, 5, 5), v(3, 5, 5, reachable=False)], False),
    ([v(1, 5, 5), v(2, 5, 5), v(3, 5, 5, digest=None)], False),
    ([v(1, 5, 5, state="candidate"), v(2, 5, 5), v(3, 5, 5)], False),  # no leader: not settled
    ([v(1, 5, 5), v(2, 5, 5, state="leader"), v(3, 5, 5)], False),  # two claim to lead
    (None, False),
])
def test_converged(voters, expected):
    assert converged(voters, 3) is expected
