"""raftka broker layer: the trio server (docs/architecture.md, "Layers")."""
