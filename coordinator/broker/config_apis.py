"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs (topics, this broker, and groups
through coordinator/groups/group_configs.py) and DescribeCluster, answered as a KRaft Kafka
broker answers them."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode as E

from ..apis import Registry, RequestContext
from .config_defs import LIST, ConfigError, parse, to_string
from .configs import describe_topic
from .client_metrics import ClientMetricsConfigs
from .loggers import BrokerLoggers
from .topics import TopicError, Topics, validate_configs, validate_name
from ..groups.group_configs import GroupConfigs

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER = 32, 33, 44, 60
LIST_CONFIG_RESOURCES = 74
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32  # resource types
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs operations
ENDPOINT_BROKERS = 1
INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or the message was sent"
    " to an incompatible broker. See the broker logs for more details."
)


class ConfigApis:
    def __init__(self, topics: Topics, cluster: Any, group_configs: GroupConfigs | None = None) -> None:
        self.topics = topics
        self.broker = topics.broker_configs
        self.cluster = cluster  # coordinator.cluster.Cluster: brokers and authorized operations
        self.group_configs = group_configs  # the GROUP config resource (None: not served)
        # KIP-714 subscriptions (resource type 16), kept and described only
        self.client_metrics = ClientMetricsConfigs(topics.data_dir) if self.broker.release >= "4" else None
        self.loggers = BrokerLoggers(self.broker.node_id, self.broker.node_ids)  # BROKER_LOGGER: the log levels

    def register(self, registry: Registry) -> None:
        registry.add(DESCRIBE_CONFIGS, range(0, 5), self.describe_configs)
        registry.add(ALTER_CONFIGS, range(0, 3), self.alter_configs)
        registry.add(INCREMENTAL_ALTER_CONFIGS, range(0, 2), self.incremental_alter_configs)
        registry.add(DESCRIBE_CLUSTER, range(0, 3), self.describe_cluster)
        registry.add(LIST_CONFIG_RESOURCES, range(0, 2), self.list_config_resources)

    # ListConfigResources ----------------------------------------------------------------

    def list_config_resources(self, ctx: RequestContext, req: Any) -> Any:
        """KIP-1142's listing, as KafkaApis.handleListConfigResources: v0 lists client-metrics
        resources only; v1 the types asked (none: every type it knows), in Kafka's order: groups
        with configs of their own, client-metrics resources, broker loggers and brokers (the live
        ones), topics. A type it does not list is UNSUPPORTED_VERSION."""
        known = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC) if ctx.version >= 1 else (CLIENT_METRICS,)
        wanted = set(getattr(req, "resource_types", ()) or known)
        if not wanted <= set(known):
            return ctx.response(throttle_time=0, error_code=E.unsupported_version, config_resources=())
        rows: list[tuple[str, int]] = []
        if GROUP in wanted and self.group_configs is not None:
            rows += [(g, GROUP) for g, own in self.group_configs.configs.items() if own]
        if CLIENT_METRICS in wanted and self.client_metrics is not None:
            rows += [(name, CLIENT_METRICS) for name in self.client_metrics.names()]
        nodes = [str(n) for n, _, _ in self.cluster.brokers(ctx)]
        if BROKER_LOGGER in wanted:
            rows += [(n, BROKER_LOGGER) for n in nodes]
        if BROKER in wanted:
            rows += [(n, BROKER) for n in nodes]
        if TOPIC in wanted:
            rows += [(t, TOPIC) for t in self.topics.topics]
        return ctx.response(
            throttle_time=0,
            error_code=E.none,
            config_resources=tuple(
                ctx.nested("ConfigResource", resource_name=name, resource_type=kind) for name, kind in rows
            ),
        )

    # DescribeConfigs --------------------------------------------------------------------

    def describe_configs(self, ctx: RequestContext, req: Any) -> Any:
        synonyms = getattr(req, "include_synonyms", False)
        docs = getattr(req, "include_documentation", False)
        results = []
        for r in req.resources:
            error, message, entries = E.none, "", []  # (Kafka 4 answers "" where there is nothing to say)
            try:
                entries = self._entries(r.resource_type, r.resource_name)
            except (TopicError, ConfigError) as e:
                error, message = e.code, "" if e.code == E.unknown_topic_or_partition else str(e)
            keys = r.configuration_keys
            configs = tuple(
                ctx.nested(
                    "DescribeConfigsResourceResult",
                    name=e.name,
                    value=None if e.sensitive else e.value,
                    read_only=e.read_only,
                    is_default=e.source == 5,
                    config_source=e.source,
                    is_sensitive=e.sensitive,
                    synonyms=tuple(
                        ctx.nested("DescribeConfigsSynonym", name=n, value=None if e.sensitive else v, source=s)
                        for n, v, s in (e.synonyms if synonyms else ())
                    ),
                    config_type=e.type,
                    # (Kafka never sets a logger's: its field's default, asked or not)
                    documentation=e.doc if docs or r.resource_type == BROKER_LOGGER else None,
                )
                for e in entries
                if keys is None or not keys or e.name in keys
            )
            results.append(_resource_result(ctx, "DescribeConfigsResult", r, error, message, configs=configs))
        return ctx.response(throttle_time=0, results=tuple(results))

    def _entries(self, resource_type: int, name: str) -> list[Any]:
        if resource_type == TOPIC:
            info = self._topic(name)
            return describe_topic(info.configs, self.broker)
        if resource_type == BROKER:
            return self.broker.describe_broker(name)
        if resource_type == BROKER_LOGGER:
            return self.loggers.describe(name)
        store = self._named(resource_type)
        if store is not None:
            return store.describe(name)
        raise self._unsupported(resource_type)

    def _named(self, resource_type: int) -> GroupConfigs | ClientMetricsConfigs | None:
        """The store of a GROUP or CLIENT_METRICS resource, where served: Kafka 4's (3.9
        refuses them as any unknown type)."""
        if resource_type == GROUP and self.broker.release >= "4":
            return self.group_configs
        if resource_type == CLIENT_METRICS:
            return self.client_metrics
        return None

    def _unsupported(self, resource_type: int) -> ConfigError:
        if resource_type == GROUP:  # (Kafka 3.9's answer, in INVALID_REQUEST's own words)
            return ConfigError(INVALID_REQUEST_MESSAGE, E.invalid_request)
        return ConfigError(f"Unsupported resource type {resource_type}", E.invalid_request)

    def _topic(self, name: str) -> Any:
        validate_name(name)
        info = self.topics.get(name)
        if info is None:
            raise TopicError(E.unknown_topic_or_partition, f"Topic {name} does not exist")
        return info

    # AlterConfigs / IncrementalAlterConfigs ---------------------------------------------

    async def alter_configs(self, ctx: RequestContext, req: Any) -> Any:
        """The legacy API: each resource's settings become exactly the ones given."""

        def replace(current: dict[str, Any], r: Any) -> dict[str, Any]:
            _refuse_null_values(r.configs)
            return {c.name: c.value for c in r.configs}

        return await self._alter(ctx, req, replace)

    async def incremental_alter_configs(self, ctx: RequestContext, req: Any) -> Any:
        return await self._alter(ctx, req, self._apply_operations)

    async def _alter(self, ctx: RequestContext, req: Any, new_settings: Any) -> Any:
        responses = []
        # (a resource named twice: each of its entries refused, as Kafka's ConfigAdminManager.preprocess)
        named = Counter((r.resource_type, r.resource_name) for r in req.resources)
        for r in req.resources:
            error, message = E.none, None
            try:
                if named[(r.resource_type, r.resource_name)] > 1:
                    raise ConfigError("Each resource must appear at most once.", E.invalid_request)
                await self._alter_one(r, new_settings, req.validate_only)
            except (TopicError, ConfigError) as e:
                error, message = e.code, str(e)
            except OSError as e:  # the configs could not be made durable: nothing changed
                error, message = E.kafka_storage_error, f"cannot store the configs: {e.strerror or e}"
            responses.append(_resource_result(ctx, "AlterConfigsResourceResponse", r, error, message))
        return ctx.response(throttle_time=0, responses=tuple(responses))

    async def _alter_one(self, r: Any, new_settings: Any, validate_only: bool) -> None:
        """The new settings are computed from the ones in force when the write runs, after
        any change still being written, so concurrent incremental changes all count."""
        if r.resource_type == BROKER_LOGGER:
            if new_settings != self._apply_operations:  # (as Kafka's broker: not the legacy API's)
                raise ConfigError(f"Unknown resource type {BROKER_LOGGER}", E.invalid_request)
            configs = [(c.name, c.config_operation, c.value) for c in r.configs]
            self.loggers.alter(r.resource_name, configs, validate_only)
        elif r.resource_type == TOPIC:
            info = self._topic(r.resource_name)
            if info.internal:
                raise ConfigError(
                    f"the configs of internal topic {info.name} cannot be changed here", E.invalid_request
                )

            def topic_settings(current: dict[str, str]) -> dict[str, str]:
                settings = new_settings(dict(current), r)
                validate_configs(settings, self.broker)
                return {k: v for k, v in settings.items() if v is not None}

            if validate_only:
                topic_settings(info.configs)
            else:
                await self.topics.set_configs(info.name, topic_settings)
        elif r.resource_type == BROKER:

            def broker_settings(current: dict[str, str]) -> dict[str, str]:
                settings = new_settings(dict(current), r)
                self.broker.validate(settings, per_broker=r.resource_name != "")
                return {k: v for k, v in settings.items() if v is not None}

            if validate_only:
                broker_settings(self.broker.layer(r.resource_name))
            else:
                await self.broker.replace(r.resource_name, broker_settings)
                self.topics.broker_configs_changed()
        elif (store := self._named(r.resource_type)) is not None:

            def named_settings(current: dict[str, str]) -> dict[str, str]:
                settings = new_settings(dict(current), r)
                store.check(r.resource_name, settings)
                return {k: v for k, v in settings.items() if v is not None}

            if validate_only:
                named_settings(store.layer(r.resource_name))
            else:
                await store.replace(r.resource_name, named_settings)
        else:
            raise self._unsupported(r.resource_type)

    def _apply_operations(self, current: dict[str, str], r: Any) -> dict[str, str | None]:
        """Kafka's IncrementalAlterConfigs: SET/DELETE any config, APPEND/SUBTRACT list
        items (not repeated when appended); a config named twice is INVALID_REQUEST."""
        names = [c.name for c in r.configs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"Error due to duplicate config keys : {', '.join(dupes)}", E.invalid_request)
        _refuse_null_values([c for c in r.configs if c.config_operation != DELETE])
        defs = self.broker.topic_defs if r.resource_type == TOPIC else {}
        if r.resource_type == GROUP and self.group_configs is not None:
            defs = self.group_configs.defs()
        settings: dict[str, str | None] = dict(current)
        for c in r.configs:
            op = c.config_operation
            if op == SET:
                settings[c.name] = c.value
            elif op == DELETE:
                settings.pop(c.name, None)
            elif op in (APPEND, SUBTRACT):
                d = defs.get(c.name) or (self.broker.definition(c.name) if r.resource_type == BROKER else None)
                controller = r.resource_type != BROKER and self.broker.release >= "4"
                if d is None and not controller:  # (Kafka 4's controller: "not LIST" for an unknown name too)
                    raise ConfigError(f"Unknown config name: {c.name}")
                if d is None or d.type != LIST or r.resource_type == GROUP:  # (Kafka types no group config LIST)
                    raise ConfigError(_not_a_list(r.resource_type, op, c.name, self.broker.release))
                if c.name in current:
                    items = parse(d, current[c.name])
                elif r.resource_type == TOPIC:
                    items = list(self.topics.get(r.resource_name).values[c.name])  # type: ignore[union-attr]  # the topic was found when the request was validated
                else:
                    items = list(self.broker.value(c.name) or [])
                given = parse(d, c.value or "")
                if op == APPEND:
                    items += [i for i in given if i not in items]
                else:
                    items = [i for i in items if i not in given]
                settings[c.name] = to_string(d, items)
            else:
                raise ConfigError(f"Unknown alter configs operation {op}", E.invalid_request)
        return settings

    # DescribeCluster --------------------------------------------------------------------

    def describe_cluster(self, ctx: RequestContext, req: Any) -> Any:
        config = self.cluster.config
        endpoint = getattr(req, "endpoint_type", ENDPOINT_BROKERS)
        if endpoint != ENDPOINT_BROKERS:  # a broker serves its brokers' endpoints only
            kind = "CONTROLLER" if endpoint == 2 else f"{endpoint}"
            return ctx.response(
                throttle_time=0,
                error_code=E.unsupported_endpoint_type,
                error_message=f"The broker does not support the {kind} endpoint type",
                endpoint_type=endpoint,
                cluster_id=config.cluster_id,
                controller_id=-1,
                brokers=(),
                cluster_authorized_operations=-(2**31),
            )
        from ..cluster import CLUSTER_OPERATIONS, NOT_ASKED

        brokers = tuple(
            ctx.nested("DescribeClusterBroker", broker_id=n, host=host, port=port, rack=None, is_fenced=False)
            for n, host, port in self.cluster.brokers(ctx)
        )
        return ctx.response(
            throttle_time=0,
            error_code=E.none,
            error_message=None,
            endpoint_type=ENDPOINT_BROKERS,
            cluster_id=config.cluster_id,
            controller_id=self.cluster.topology.controller(),
            brokers=brokers,
            cluster_authorized_operations=CLUSTER_OPERATIONS
            if req.include_cluster_authorized_operations
            else NOT_ASKED,
        )


def _not_a_list(resource_type: int, op: int, name: str, release: str) -> str:
    """Kafka's refusal of APPEND or SUBTRACT on a config that is not a list: the controller's
    (topics and groups, Kafka 4) or the broker's words."""
    if resource_type != BROKER and release >= "4":
        return f"Can't {'APPEND' if op == APPEND else 'SUBTRACT'} to key {name} because its type is not LIST."
    return f"Config value {'append' if op == APPEND else 'subtract'} is not allowed for config key: {name}"


def _refuse_null_values(configs: Any) -> None:
    """Kafka: only DELETE may come without a value."""
    for c in configs:
        if c.value is None:
            raise ConfigError(f"Null value not supported for : {c.name}", E.invalid_request)


def _resource_result(ctx: RequestContext, entity: str, r: Any, error: int, message: str | None, **more: Any) -> Any:
    """A resource's row in a DescribeConfigs or (Incremental)AlterConfigs answer: the resource
    as the request names it, its error, and `more` (DescribeConfigs' configs)."""
    return ctx.nested(
        entity,
        error_code=error,
        error_message=message,
        resource_type=r.resource_type,
        resource_name=r.resource_name,
        **more,
    )
