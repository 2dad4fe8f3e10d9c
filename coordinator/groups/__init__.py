"""The group coordinator, laid out as Kafka's: the shared runtime here (runtime.py, shard.py,
offsets, clock, records, the wire mapping in api.py), and one package per group type:
classic/ (JoinGroup/SyncGroup/Heartbeat/LeaveGroup), modern/ (what KIP-848 consumer groups
and KIP-932 share groups share) with modern/consumer/ and modern/share/, and streams/
(KIP-1071)."""
