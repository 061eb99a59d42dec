"""Transactions (KIP-98, KIP-890): producer ids, the transaction coordinator over
`__transaction_state`, its markers, and the partition-leader verification. `txn_state` is the pure core."""
