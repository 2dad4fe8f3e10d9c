"""Classic groups: Kafka's JoinGroup/SyncGroup/Heartbeat/LeaveGroup protocol (ClassicGroup and
its manager), and the consumer subscription embedded in a classic member's metadata."""
