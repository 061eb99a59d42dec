"""Two voters with different quorum secrets: BOTH logs say the secret may be wrong, not only
the log of the node that received the other's frames (raft_meta/quorum/quorum_transport.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.quorum_procs import make_voters

pytestmark = pytest.mark.timeout(120)


def test_a_secret_mismatch_is_named_on_both_nodes(tmp_path: Path) -> None:
    one, two = make_voters(2, tmp_path, "the-right-secret")
    two.secret = "a-different-secret"
    try:
        one.start()
        two.start()
        for voter in (one, two):
            voter.wait_for(lambda events: any("controller.quorum.secret" in str(e.get("reason", ""))
                                              for e in events), 60,
                           "a warning that names controller.quorum.secret")
    finally:
        one.stop()
        two.stop()
