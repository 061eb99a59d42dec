"""The network edge: the listener and connections, TLS, SASL, connection quotas, request memory,
zero-copy sends, and the broker-to-controller / broker-to-broker channels."""
