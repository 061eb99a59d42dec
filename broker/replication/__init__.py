"""Partition replication: the ISR protocol (`replica_state`, pure) and its shell (`partition`),
the replica manager, the follower fetcher, fetch sessions, preferred-replica selection and throttling."""
