"""raftka chaos layer: Jepsen-style runs against real nodes (docs/using-chaos.md)."""
