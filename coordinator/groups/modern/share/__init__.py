"""KIP-932 share groups' membership (ShareGroupHeartbeat, ShareGroupDescribe). The
share-partitions themselves (acquired records, ShareFetch) are coordinator/share/."""
