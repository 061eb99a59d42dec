"""raftka log layer (see DESIGN.md)."""
