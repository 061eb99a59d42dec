"""raftka log layer: record batches and on-disk partition logs (docs/architecture.md, "Layers")."""
