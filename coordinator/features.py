"""Kafka's feature flags (KIP-584): what this server supports and has finalized, as ApiVersions
v3+ carries them and UpdateFeatures (57) changes them.

Each feature's supported range ends at the level this server really implements: a client reads
a finalized level as a promise (a Kafka 4 producer uses transactions v2 when
`transaction.version` is 2, a consumer the KIP-848 protocol when `group.version` is 1), so a
level is declared here only once what it means is served. Raise a feature's `implemented` below
when its work lands (transactions v2): it becomes the top of the
supported range and the level a new data dir finalizes, and UpdateFeatures can then upgrade an
existing one to it.

What each level means, from Kafka 4.4's server-common feature classes:
- metadata.version: the KRaft metadata format and the release's protocol; 7 (3.3-IV3) is the
  oldest Kafka 4 knows, 33 (4.4-IV2) its newest production level.
- group.version 1: KIP-848 consumer groups (ConsumerGroupHeartbeat).
- share.version 1: KIP-932 share groups; 2: share-group dead-letter queues (KIP-1191,
  coordinator/share/dead_letters.py).
- eligible.leader.replicas.version 1: KIP-966 ELR (DescribeTopicPartitions' ELR fields).
- kraft.version 1: a dynamic controller quorum (KIP-853); this node is a single voter,
  finalized at 0 as a Kafka node formatted with `controller.quorum.voters` (an upgrade is
  taken and kept, as Kafka takes it; no voter can be added here either way).
- transaction.version 1: the flexible TransactionLogValue in `__transaction_state`; 2: KIP-890
  part 2 (EndTxn v5, epoch bumps per transaction).
- streams.version 1: KIP-1071 streams groups (StreamsGroupHeartbeat).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, cast

from protocol.error_response import error_response

from .durable import JsonFile
from .java_order import java_hash_order

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    min_level: int  # the lowest level supported (Kafka's SupportedMinVersion)
    implemented: int  # the highest level this server serves: its SupportedMaxVersion


METADATA_VERSION = Feature("metadata.version", 7, 33)  # 3.3-IV3 .. 4.4-IV2
GROUP_VERSION = Feature("group.version", 0, 1)
SHARE_VERSION = Feature("share.version", 0, 2)
ELIGIBLE_LEADER_REPLICAS_VERSION = Feature("eligible.leader.replicas.version", 0, 1)
KRAFT_VERSION = Feature("kraft.version", 0, 1)
# Transactions v2 (KIP-890 part 2): EndTxn v5's epoch bump, Produce v12 / TxnOffsetCommit v5
# adding their partitions; a v2 transaction is kept in TransactionLogValue v1.
TRANSACTION_VERSION = Feature("transaction.version", 0, 2)
# KIP-1071 streams groups: StreamsGroupHeartbeat/StreamsGroupDescribe (coordinator/groups/streams/)
STREAMS_VERSION = Feature("streams.version", 0, 1)

FEATURES = (
    METADATA_VERSION,
    GROUP_VERSION,
    SHARE_VERSION,
    ELIGIBLE_LEADER_REPLICAS_VERSION,
    KRAFT_VERSION,
    TRANSACTION_VERSION,
    STREAMS_VERSION,
)
BY_NAME = {f.name: f for f in FEATURES}
# Finalized at first start (Kafka's StorageTool format with its defaults): the implemented level,
# except kraft.version, which a node formatted with static voters keeps at 0.
DEFAULTS = {f.name: (0 if f is KRAFT_VERSION else f.implemented) for f in FEATURES}


# The order Kafka 4.4's broker lists finalized features in (its metadata image's)
FINALIZED_ORDER = (
    "group.version",
    "kraft.version",
    "streams.version",
    "transaction.version",
    "eligible.leader.replicas.version",
    "share.version",
    "metadata.version",
)

# What Kafka 3.9 supports and finalizes at format, for --kafka-version 3.9: name -> (lowest,
# highest, finalized), as a 3.9.1 node lists them in ApiVersions v4 (recorded in
# tests/oracle/kafka-3.9-api-versions.json): no group, share, streams, transaction or ELR
# feature (3.9 had none of them in production), so their APIs are off as at 3.9 (GATED).
KAFKA_3_9_FEATURES = {"metadata.version": (1, 21, 21), "kraft.version": (0, 1, 0)}

# (feature, level) -> (feature, level) it needs (FeatureVersion.dependencies())
DEPENDENCIES = {("eligible.leader.replicas.version", 1): ("metadata.version", 23)}  # 4.0-IV1

# UpdateFeatures upgrade types (FeatureUpdate.UpgradeType)
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


class Features:
    """The finalized levels and their epoch, kept in `features.json` in the data dir once an
    UpdateFeatures changed one (a data dir without it has the defaults). The epoch is what
    ApiVersions calls FinalizedFeaturesEpoch: it grows with every change (Kafka's is the
    metadata log offset of the image, so only its growth is comparable)."""

    def __init__(
        self, data_dir: Path, node_id: int = 1, release: str = "4.4", listeners: Iterable[Callable[[], None]] = ()
    ) -> None:
        self.node_id = node_id  # (the controller Kafka's refusals name)
        self.file = JsonFile(Path(data_dir) / "features.json")
        doc = self.file.load(default=None, parse=_parse)
        levels, self.epoch = doc if doc is not None else ({}, 1)
        # name -> (lowest, highest) supported: the release's features, each up to what is implemented
        defaults = DEFAULTS
        self.bounds = {f.name: (f.min_level, f.implemented) for f in FEATURES}
        if release < "4":
            defaults = {n: level for n, (_, _, level) in KAFKA_3_9_FEATURES.items()}
            self.bounds = {
                n: (low, min(high, BY_NAME[n].implemented)) for n, (low, high, _) in KAFKA_3_9_FEATURES.items()
            }
        # a level above what is supported now (a store from a newer build or release) is capped
        self.levels = {n: min(max(levels.get(n, defaults[n]), low), high) for n, (low, high) in self.bounds.items()}
        self.supported_order = java_hash_order(list(self.bounds))
        self.listeners = list(listeners)  # called after a change (the ApiVersions answers are rebuilt)

    def level(self, name: str) -> int:
        return cast(int, self.levels.get(name, 0))

    def supported(self, *, without_level_0: bool = False) -> list[tuple[str, int, int]]:
        """(name, min, max) in Kafka's order. ApiVersions v0-3 leave out those whose minimum is
        0: older clients (KAFKA-17011) refuse a range that starts at 0."""
        out = [(n, *self.bounds[n]) for n in self.supported_order]
        return [s for s in out if s[1] > 0] if without_level_0 else out

    def finalized(self) -> list[tuple[str, int]]:
        """(name, level) of every feature finalized above 0 (a level 0 is no finalized feature,
        as Kafka removes it from its image), metadata.version always."""
        return [(n, self.level(n)) for n in FINALIZED_ORDER if self.level(n) > 0 or n == METADATA_VERSION.name]

    def check(self, name: str, level: int, upgrade_type: int, proposed: dict[str, int]) -> str | None:
        """Why FeatureControlManager would refuse `name` at `level` (its INVALID_UPDATE_VERSION
        message), or None. `proposed`: every level as the whole request would leave them (a
        dependency may be raised in the same request)."""
        if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return _invalid(name, level, "The controller does not support the given upgrade type.")
        current = self.level(name)
        if level < 0:
            return _invalid(name, level, "A feature version cannot be less than 0.")
        feature = BY_NAME.get(name) if name in self.bounds else None
        low, high = self.bounds.get(name, (0, 0))
        if not low <= level <= high:
            what = f"Local controller {self.node_id}"
            if high == 0:
                return _invalid(name, level, f"{what} does not support this feature.")
            return _invalid(name, level, f"{what} only supports versions {low}-{high}")
        if feature is None:  # (at 0: supported, as every unknown feature is, but no feature to set)
            return _invalid(name, level, f"Feature {name} not found.")
        if level < current:
            if upgrade_type == UPGRADE:
                return _invalid(
                    name,
                    level,
                    "Can't downgrade the version of this feature without setting the upgrade type "
                    "to either safe or unsafe downgrade.",
                )
        elif level > current and upgrade_type != UPGRADE:
            return _invalid(name, level, "Can't downgrade to a newer version.")
        if feature is KRAFT_VERSION and level != current and upgrade_type != UPGRADE:
            return _invalid(name, level, "Can't downgrade the version of this feature.")
        if feature is METADATA_VERSION and level < current:
            return (
                f"Unsupported metadata.version downgrade from {current} to {level}. Refusing to perform "
                "the requested downgrade because it might delete metadata information."
            )
        needed = DEPENDENCIES.get((name, level))
        if needed is not None and proposed.get(needed[0], 0) < needed[1]:
            return _invalid(
                name, level, f"{name} could not be set to {level} because it depends on {needed[0]} level {needed[1]}"
            )
        return None

    async def apply(self, changes: dict[str, int]) -> None:
        """Finalize the levels of `changes` (each checked), durably, then in memory."""
        levels = {**self.levels, **changes}
        epoch = self.epoch + 1

        def done() -> None:
            self.levels, self.epoch = levels, epoch
            log.info("finalized features: %s (epoch %d)", changes, epoch)
            for listener in self.listeners:
                listener()

        await self.file.save({"levels": levels, "epoch": epoch}, then=done)


def _invalid(name: str, level: int, message: str) -> str:
    return f"Invalid update version {level} for feature {name}. {message}"


def _parse(doc: Any) -> tuple[dict[str, int], int]:
    levels = {str(k): int(v) for k, v in doc["levels"].items()}
    return levels, int(doc["epoch"])


class FeatureApis:
    """UpdateFeatures (57), answered as Kafka's QuorumController.updateFeatures: every update
    checked (FeatureControlManager's order and messages), the first refusal fails them all
    (INVALID_UPDATE_VERSION, "The update failed for all features since ..."), else all are
    finalized together (unless validate_only)."""

    def __init__(self, features: Features) -> None:
        self.features = features

    def register(self, registry: Any) -> None:
        registry.add(UPDATE_FEATURES, range(0, 3), self.update_features)

    async def update_features(self, ctx: Any, request: Any) -> Any:
        updates: dict[str, int] = {}
        types: dict[str, int] = {}
        for u in request.feature_updates:  # (a name given twice: its last update, as Kafka's map)
            updates[u.feature] = u.max_version_level
            types[u.feature] = getattr(u, "upgrade_type", UPGRADE)  # (v0: the controller reads UPGRADE)
        features = self.features
        proposed = {**features.levels, **updates}
        for name in java_hash_order(list(updates)):
            reason = features.check(name, updates[name], types[name], proposed)
            if reason is not None:
                return ctx.response(
                    throttle_time=0,
                    error_code=INVALID_UPDATE_VERSION,
                    error_message=f"The update failed for all features since the following feature had an error: {reason}",
                    results=(),
                )
        changes = {n: level for n, level in updates.items() if n in features.bounds and features.level(n) != level}
        if changes and not getattr(request, "validate_only", False):
            await features.apply(changes)
        results = (
            ()
            if ctx.version >= 2  # (v2 answers without per-feature results)
            else tuple(
                # (Errors.NONE.message(): its name)
                ctx.nested("UpdatableFeatureResult", feature=u.feature, error_code=0, error_message="NONE")
                for u in {u.feature: u for u in request.feature_updates}.values()
            )
        )
        return ctx.response(throttle_time=0, error_code=0, error_message=None, results=results)


UPDATE_FEATURES = 57
INVALID_UPDATE_VERSION = 95
UNSUPPORTED_VERSION = 35

# The APIs a finalized level switches on (KafkaApis.isConsumerGroupProtocolEnabled,
# isShareGroupProtocolEnabled): below level 1 they are answered UNSUPPORTED_VERSION
GATED = {
    68: GROUP_VERSION,  # ConsumerGroupHeartbeat
    69: GROUP_VERSION,  # ConsumerGroupDescribe
    76: SHARE_VERSION,  # ShareGroupHeartbeat
    77: SHARE_VERSION,  # ShareGroupDescribe
    78: SHARE_VERSION,  # ShareFetch
    79: SHARE_VERSION,  # ShareAcknowledge
    90: SHARE_VERSION,  # DescribeShareGroupOffsets
    91: SHARE_VERSION,  # AlterShareGroupOffsets
    92: SHARE_VERSION,  # DeleteShareGroupOffsets
}


def gate_apis(registry: Any, features: Features) -> None:
    """Wrap the handlers of GATED: a feature downgraded to 0 (UpdateFeatures) turns its APIs off
    as Kafka's broker does, while they stay advertised."""
    for key, feature in GATED.items():
        api = registry.served.get(key)
        if api is None:
            continue

        def gated(ctx: Any, request: Any, handler: Any = api.handler, name: str = feature.name) -> Any:
            if features.level(name) >= 1:
                return handler(ctx, request)
            return error_response(
                ctx.header.api_key, ctx.version, ctx.codec.response_type, request, UNSUPPORTED_VERSION
            )

        registry.add(key, range(api.min_version, api.max_version + 1), gated, cancel_on_close=api.cancel_on_close)
