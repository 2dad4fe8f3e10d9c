"""Kafka's classic consumer-group coordinator (JoinGroup/SyncGroup/Heartbeat/LeaveGroup)."""
