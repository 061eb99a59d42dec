"""The Raft quorum on pysyncobj: the `Quorum` facade, its transport, pysyncobj's patches
(durable journal, fixes), the voter guard, storage format and the liveness probe."""
