"""raftka raft_meta layer (see DESIGN.md)."""
