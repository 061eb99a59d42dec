"""raftka client layer (see DESIGN.md)."""
