"""raftka broker layer (see DESIGN.md)."""
