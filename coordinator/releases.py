"""The Kafka release this server answers as (`--kafka-version`): the request versions that
release serves. Its configs are picked in coordinator/broker/config_defs.py.

Kafka 4.0 removed the request versions of clients older than 2.1 (KIP-896): its ApiVersions
starts each of these APIs at a higher version, and a request of a removed version gets its
connection closed, as any version a broker does not serve. Produce is the exception: Kafka 4
still lists it from v0, because librdkafka reads a higher minimum as no Produce at all
(KAFKA-18659), yet closes the connection of a Produce v0-2 all the same (measured on Kafka
4.4.0). Kafka 3.9 serves them all, for old clients: `--kafka-version 3.9`, whose highest
versions are 3.9's too (and no share-group APIs: they came with 4.0).
"""

from __future__ import annotations

from dataclasses import replace

from .apis import Registry

PRODUCE = 0
# api key -> Kafka 4's lowest version (KIP-896), for the APIs whose old versions it removed.
KAFKA_4_MIN_VERSIONS: dict[int, int] = {
    PRODUCE: 3,  # (advertised from v0: see above)
    1: 4,  # Fetch
    2: 1,  # ListOffsets
    8: 2,  # OffsetCommit
    9: 1,  # OffsetFetch
    19: 2,  # CreateTopics
    20: 1,  # DeleteTopics
    23: 2,  # OffsetForLeaderEpoch
    27: 1,  # WriteTxnMarkers
    29: 1,  # DescribeAcls
    30: 1,  # CreateAcls
    31: 1,  # DeleteAcls
    32: 1,  # DescribeConfigs
    34: 1,  # AlterReplicaLogDirs
    35: 1,  # DescribeLogDirs
    38: 1,  # CreateDelegationToken
    39: 1,  # RenewDelegationToken
    40: 1,  # ExpireDelegationToken
    41: 1,  # DescribeDelegationToken
}
# The versions Kafka 4 lists in ApiVersions below the ones it accepts.
KAFKA_4_ADVERTISED_MIN: dict[int, int] = {PRODUCE: 0}
# api key -> Kafka 3.9's highest version, as a 3.9.1 KRaft node lists them (measured); an API
# not here is not served by 3.9 (share groups came with 4.0).
KAFKA_3_9_MAX_VERSIONS: dict[int, int] = {
    0: 11,  # Produce
    1: 17,  # Fetch
    2: 9,  # ListOffsets
    3: 12,  # Metadata
    8: 9,  # OffsetCommit
    9: 9,  # OffsetFetch
    10: 6,  # FindCoordinator
    11: 9,  # JoinGroup
    12: 4,  # Heartbeat
    13: 5,  # LeaveGroup
    14: 5,  # SyncGroup
    15: 5,  # DescribeGroups
    16: 5,  # ListGroups
    17: 1,  # SaslHandshake
    18: 4,  # ApiVersions
    19: 7,  # CreateTopics
    20: 6,  # DeleteTopics
    21: 2,  # DeleteRecords
    22: 5,  # InitProducerId
    23: 4,  # OffsetForLeaderEpoch
    24: 5,  # AddPartitionsToTxn
    25: 4,  # AddOffsetsToTxn
    26: 4,  # EndTxn
    27: 1,  # WriteTxnMarkers
    28: 4,  # TxnOffsetCommit
    29: 3,  # DescribeAcls
    30: 3,  # CreateAcls
    31: 3,  # DeleteAcls
    32: 4,  # DescribeConfigs
    33: 2,  # AlterConfigs
    34: 2,  # AlterReplicaLogDirs
    35: 4,  # DescribeLogDirs
    36: 2,  # SaslAuthenticate
    37: 3,  # CreatePartitions
    38: 3,  # CreateDelegationToken
    39: 2,  # RenewDelegationToken
    40: 2,  # ExpireDelegationToken
    41: 3,  # DescribeDelegationToken
    42: 2,  # DeleteGroups
    43: 2,  # ElectLeaders
    44: 1,  # IncrementalAlterConfigs
    45: 0,  # AlterPartitionReassignments
    46: 0,  # ListPartitionReassignments
    47: 0,  # OffsetDelete
    48: 1,  # DescribeClientQuotas
    49: 1,  # AlterClientQuotas
    50: 0,  # DescribeUserScramCredentials
    51: 0,  # AlterUserScramCredentials
    55: 2,  # DescribeQuorum
    57: 1,  # UpdateFeatures
    60: 1,  # DescribeCluster
    61: 0,  # DescribeProducers
    64: 0,  # UnregisterBroker
    65: 0,  # DescribeTransactions
    66: 1,  # ListTransactions
    68: 0,  # ConsumerGroupHeartbeat
    69: 0,  # ConsumerGroupDescribe
    74: 0,  # ListConfigResources
    75: 0,  # DescribeTopicPartitions
    80: 0,  # AddRaftVoter
    81: 0,  # RemoveRaftVoter
}


def apply_release(registry: Registry, release: str) -> None:
    """Every registered API's served range as the release serves it."""
    if release < "4":
        for key, served in list(registry.served.items()):
            most = KAFKA_3_9_MAX_VERSIONS.get(key)
            if most is None or most < served.min_version:
                registry.withdraw(key)
            elif most < served.max_version:
                registry.served[key] = replace(served, max_version=most)
                registry.narrow(key, served.min_version, most)
        return
    for key, least in KAFKA_4_MIN_VERSIONS.items():
        api = registry.served.get(key)
        if api is None or api.min_version >= least:
            continue
        registry.served[key] = replace(api, min_version=least)
        registry.narrow(key, least, api.max_version)
    registry.advertised_min.update({k: v for k, v in KAFKA_4_ADVERTISED_MIN.items() if k in registry.served})
