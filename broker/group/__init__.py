"""Group coordination: classic groups (JoinGroup/SyncGroup), KIP-848 consumer groups, share groups,
and the offsets they commit (in transactions too). Pure cores are `*_state`; `group_coordinator`
is their shell over `__consumer_offsets`."""
