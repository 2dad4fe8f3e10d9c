"""KIP-932 share-partitions: the records a share group's members acquire and acknowledge
(partition.py), their durable state in `__share_group_state` (state_log.py), and ShareFetch /
ShareAcknowledge with share sessions (manager.py)."""
