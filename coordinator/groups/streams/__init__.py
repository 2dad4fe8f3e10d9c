"""Streams groups (KIP-1071, StreamsGroupHeartbeat/StreamsGroupDescribe) go here, beside
classic/ and modern/, as Kafka's group coordinator keeps them in group/streams/. Not served
yet."""
