"""raftka for tests and tools, public like `trio.testing`: the local cluster (real broker
processes), the pytest plugin (`raftka_cluster`, `raftka_bootstrap`, `raftka_topic`), certificates
and the secure cluster, cluster control, and the perf load generators."""
