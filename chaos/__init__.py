"""raftka chaos layer (see DESIGN.md)."""
