"""The metadata log: record types, the image they build (`apply`, pure), snapshots, the
loader a broker replays, bootstrap records and the dump tool."""
