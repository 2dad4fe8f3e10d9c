"""Streams groups (KIP-1071): StreamsGroupHeartbeat and StreamsGroupDescribe, as Kafka's group
coordinator keeps them in group/streams/: the topology and its validation (topology.py), the
sticky task assignor (assignor.py), the group and its records (streams_group.py), the heartbeat
(streams_manager.py) and the wire mapping (streams_api.py)."""
