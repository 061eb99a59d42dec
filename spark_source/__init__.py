"""raftka spark_source layer (see DESIGN.md)."""
