"""raftka chaos layer: Jepsen-style runs against real nodes (README.md, "Chaos testing")."""
