"""raftka client/protocol layer (see DESIGN.md)."""
