"""Steps that send one request at a chosen version to both clusters, on a real socket, with
raftka's codec (tests/compat/wire_client.py), for the newest versions no CLI tool exercises alone:
what each answers is printed as error names and the fields that matter, not the wording.

Each step is a short Python program (tool "python", tests/differential/tools.py) that gets the
bootstrap address as argv[1].
"""

from __future__ import annotations

from pathlib import Path

from tests.differential.client_steps import python
from tests.differential.steps import Scenario

_REPO = str(Path(__file__).resolve().parents[2])

_WIRE = f"""\
import sys
sys.path.insert(0, {_REPO!r})
from raftka.client.protocol import ApiKey, error_info
from tests.compat.wire_client import WireConnection
conn = WireConnection(sys.argv[1], client_id="differential")
def name(code):
    return error_info(code).name
"""

WIRE = Scenario("wire-versions", steps=(
    python("wire.metadata-v13-and-api-versions-v5", _WIRE, """\
md = conn.request(ApiKey.METADATA, 13, {"topics": []})
print("metadata v13", name(md.error_code), "brokers", len(md.brokers))
cluster, node = md.cluster_id, md.brokers[0].node_id
for label, cid, nid in (("neither", None, -1), ("own", cluster, node),
                        ("other-cluster", "not-" + cluster, node), ("other-node", cluster, node + 1),
                        ("empty-cluster", "", node), ("cluster-only", cluster, -1), ("node-only", None, node)):
    r = conn.request(ApiKey.API_VERSIONS, 5, {"client_software_name": "differential",
                     "client_software_version": "1", "cluster_id": cid, "node_id": nid})
    print("api-versions v5", label, name(r.error_code), "api_keys" if r.api_keys else "no api_keys")
# The connection stays open after REBOOTSTRAP_REQUIRED.
print("after", name(conn.request(ApiKey.METADATA, 13, {"topics": []}).error_code))
"""),
))
