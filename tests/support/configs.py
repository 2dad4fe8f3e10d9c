"""DescribeConfigs / AlterConfigs / IncrementalAlterConfigs requests and the resource types they name."""

from __future__ import annotations

from tests.support.data_plane import cls

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL, DESCRIBE_CLUSTER = 32, 33, 44, 60


TOPIC, BROKER = 2, 4


TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5


async def describe(conn, kind, name, keys=None, v=4, synonyms=True, docs=False):
    R = cls(DESCRIBE_CONFIGS, v, "DescribeConfigsResource")
    r = await conn.request(
        DESCRIBE_CONFIGS,
        v,
        cls(DESCRIBE_CONFIGS, v)(
            resources=(R(resource_type=kind, resource_name=name, configuration_keys=keys),),
            include_synonyms=synonyms,
            include_documentation=docs,
        ),
    )
    return r.results[0]


async def incremental(conn, kind, name, ops, validate_only=False, v=1):
    C, R = cls(INCREMENTAL, v, "AlterableConfig"), cls(INCREMENTAL, v, "AlterConfigsResource")
    r = await conn.request(
        INCREMENTAL,
        v,
        cls(INCREMENTAL, v)(
            resources=(
                R(
                    resource_type=kind,
                    resource_name=name,
                    configs=tuple(C(name=n, config_operation=op, value=val) for n, op, val in ops),
                ),
            ),
            validate_only=validate_only,
        ),
    )
    return r.responses[0].error_code, r.responses[0].error_message


async def alter(conn, kind, name, configs, v=2, validate_only=False):
    C, R = cls(ALTER_CONFIGS, v, "AlterableConfig"), cls(ALTER_CONFIGS, v, "AlterConfigsResource")
    r = await conn.request(
        ALTER_CONFIGS,
        v,
        cls(ALTER_CONFIGS, v)(
            resources=(
                R(resource_type=kind, resource_name=name, configs=tuple(C(name=n, value=val) for n, val in configs)),
            ),
            validate_only=validate_only,
        ),
    )
    return r.responses[0].error_code


def by_name(result):
    return {c.name: c for c in result.configs}
