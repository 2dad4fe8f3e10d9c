"""Kafka's dynamic broker configs beyond the log defaults (DynamicBrokerConfig.AllDynamicConfigs):
the log cleaner's, the thread pools', the listeners' SSL and SASL ones, the connection limits,
the producer state's, remote storage's, the replication quotas, the coordinators' buffers and
the group assignment intervals.

AlterConfigs and IncrementalAlterConfigs on a broker accept these (and names Kafka does not
know at all: custom configs, which DynamicConfig.Broker allows), and refuse Kafka's other
broker configs as DynamicBrokerConfig.validateConfigs does. This broker stores and describes
them all; the ones it implements (message.max.bytes, max.connections, log.cleaner.backoff.ms,
group.consumer.assignment.interval.ms, group.share.assignment.interval.ms and the log
defaults) take effect at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .config_defs import (
    BOOLEAN,
    CLASS,
    DOUBLE,
    INT,
    LIST,
    LONG,
    LONG_MAX,
    PASSWORD,
    SHORT,
    STRING,
    ConfigDef,
    at_least,
    between,
    one_of,
)

INT_MAX = 2**31 - 1
DOUBLE_MAX = 1.7976931348623157e308


def _d(
    name: str, type_: int, default: Any, doc: str, validator: Callable[[Any], str | None] | None = None
) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, validator)


# SslConfigs.RECONFIGURABLE_CONFIGS (DynamicSecurityConfigs): only per listener, with the
# listener.name.<listener>. prefix.
SECURITY_CONFIG_DEFS = {
    d.name: d
    for d in (
        _d("ssl.keystore.type", STRING, "JKS", "File format of the key store."),
        _d("ssl.keystore.location", STRING, None, "Location of the key store file."),
        _d("ssl.keystore.password", PASSWORD, None, "Password of the key store file."),
        _d("ssl.key.password", PASSWORD, None, "Password of the private key."),
        _d("ssl.truststore.type", STRING, "JKS", "File format of the trust store."),
        _d("ssl.truststore.location", STRING, None, "Location of the trust store file."),
        _d("ssl.truststore.password", PASSWORD, None, "Password of the trust store file."),
        _d("ssl.keystore.certificate.chain", PASSWORD, None, "Certificate chain in PEM."),
        _d("ssl.keystore.key", PASSWORD, None, "Private key in PEM."),
        _d("ssl.truststore.certificates", PASSWORD, None, "Trusted certificates in PEM."),
    )
}

# DynamicListenerConfig.ReconfigurableConfigs (besides the security ones above).
LISTENER_CONFIG_DEFS = {
    d.name: d
    for d in (
        _d("listeners", LIST, ["PLAINTEXT://:9092"], "Listeners: URIs with listener names."),
        _d(
            "listener.security.protocol.map",
            STRING,
            "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "Listener names and their security protocols.",
        ),
        _d(
            "principal.builder.class",
            CLASS,
            "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
            "Builds the principal of a connection.",
        ),
        _d("ssl.protocol", STRING, "TLSv1.3", "TLS protocol of the SSLContext."),
        _d("ssl.provider", STRING, None, "Security provider of the SSL connections."),
        _d("ssl.cipher.suites", LIST, [], "Cipher suites."),
        _d("ssl.enabled.protocols", LIST, ["TLSv1.2", "TLSv1.3"], "TLS protocols enabled."),
        _d("ssl.keymanager.algorithm", STRING, "SunX509", "Key manager factory algorithm."),
        _d("ssl.trustmanager.algorithm", STRING, "PKIX", "Trust manager factory algorithm."),
        _d("ssl.endpoint.identification.algorithm", STRING, "https", "Server host name verification."),
        _d("ssl.secure.random.implementation", STRING, None, "SecureRandom implementation."),
        _d(
            "ssl.client.auth",
            STRING,
            "none",
            "Client authentication: required, requested or none.",
            one_of("required", "requested", "none"),
        ),
        _d("ssl.engine.factory.class", CLASS, None, "Provides SSLEngine objects."),
        _d("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI", "SASL mechanism between brokers."),
        _d("sasl.jaas.config", PASSWORD, None, "JAAS login context parameters."),
        _d("sasl.enabled.mechanisms", LIST, ["GSSAPI"], "SASL mechanisms enabled."),
        _d("sasl.kerberos.service.name", STRING, None, "Kerberos principal name Kafka runs as."),
        _d("sasl.kerberos.kinit.cmd", STRING, "/usr/bin/kinit", "Kerberos kinit command path."),
        _d("sasl.kerberos.ticket.renew.window.factor", DOUBLE, 0.8, "Share of the ticket's life before renewal."),
        _d("sasl.kerberos.ticket.renew.jitter", DOUBLE, 0.05, "Random jitter added to the renewal time."),
        _d("sasl.kerberos.min.time.before.relogin", LONG, 60_000, "Login thread sleep time between refreshes."),
        _d("sasl.kerberos.principal.to.local.rules", LIST, ["DEFAULT"], "Principal name to short name rules."),
        _d(
            "sasl.login.refresh.window.factor",
            DOUBLE,
            0.8,
            "Share of the credential's life before refresh.",
            between(0.5, 1.0),
        ),
        _d(
            "sasl.login.refresh.window.jitter",
            DOUBLE,
            0.05,
            "Random jitter added to the refresh time.",
            between(0.0, 0.25),
        ),
        _d("sasl.login.refresh.min.period.seconds", SHORT, 60, "Least time between refreshes.", between(0, 900)),
        _d("sasl.login.refresh.buffer.seconds", SHORT, 300, "Time before expiry to refresh.", between(0, 3600)),
        _d("max.connections", INT, INT_MAX, "Most connections open at once.", at_least(0)),
        _d("max.connection.creation.rate", INT, INT_MAX, "Most new connections per second.", at_least(0)),
        _d("num.network.threads", INT, 3, "Threads receiving requests and sending responses.", at_least(1)),
    )
}

OTHER_DYNAMIC_DEFS = {
    d.name: d
    for d in (
        # LogCleaner.RECONFIGURABLE_CONFIGS (message.max.bytes is a log default)
        _d("log.cleaner.threads", INT, 1, "Background threads for log cleaning.", at_least(0)),
        _d("log.cleaner.dedupe.buffer.size", LONG, 128 * 1024 * 1024, "Memory for log deduplication, all threads."),
        _d("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, "Load factor of the deduplication buffer."),
        _d("log.cleaner.io.buffer.size", INT, 512 * 1024, "Memory for log cleaner I/O buffers.", at_least(0)),
        _d("log.cleaner.io.max.bytes.per.second", DOUBLE, DOUBLE_MAX, "I/O cap of the log cleaner."),
        _d(
            "log.cleaner.backoff.ms",
            LONG,
            15_000,
            "How long the cleaner sleeps when no log needs cleaning.",
            at_least(0),
        ),
        # DynamicThreadPool.RECONFIGURABLE_CONFIGS
        _d("num.io.threads", INT, 8, "Threads processing requests.", at_least(1)),
        _d("num.replica.fetchers", INT, 1, "Fetcher threads per source broker.", at_least(1)),
        _d(
            "num.recovery.threads.per.data.dir",
            INT,
            2,
            "Threads per data dir for log recovery and flushing.",
            at_least(1),
        ),
        _d("background.threads", INT, 10, "Threads for background tasks.", at_least(1)),
        _d("metric.reporters", LIST, [], "Metrics reporter classes."),
        _d("config.providers", LIST, [], "Config provider classes."),
        # SocketServer.ReconfigurableConfigs (max.connections and the creation rate above)
        _d("max.connections.per.ip", INT, INT_MAX, "Most connections from one address.", at_least(0)),
        _d("max.connections.per.ip.overrides", STRING, "", "Per-address overrides of max.connections.per.ip."),
        # DynamicProducerStateManagerConfig
        _d("producer.id.expiration.ms", INT, 86_400_000, "How long an idle producer id's state is kept.", at_least(1)),
        _d(
            "transaction.partition.verification.enable",
            BOOLEAN,
            True,
            "Verify a partition is in the transaction before a transactional write.",
        ),
        # DynamicRemoteLogConfig
        _d(
            "remote.log.index.file.cache.total.size.bytes",
            LONG,
            1024**3,
            "Size of the remote index cache.",
            at_least(1),
        ),
        _d("remote.log.manager.copy.max.bytes.per.second", LONG, LONG_MAX, "Copy rate to remote storage.", at_least(1)),
        _d(
            "remote.log.manager.fetch.max.bytes.per.second",
            LONG,
            LONG_MAX,
            "Fetch rate from remote storage.",
            at_least(1),
        ),
        _d("remote.log.reader.threads", INT, 10, "Threads reading remote storage.", at_least(1)),
        _d("remote.log.manager.copier.thread.pool.size", INT, 10, "Threads copying to remote storage.", at_least(1)),
        _d("remote.log.manager.expiration.thread.pool.size", INT, 10, "Threads expiring remote segments.", at_least(1)),
        _d("remote.fetch.max.wait.ms", INT, 500, "Longest wait of a remote fetch.", at_least(1)),
        _d("remote.list.offsets.request.timeout.ms", LONG, 30_000, "Timeout of a remote ListOffsets.", at_least(1)),
        # DynamicReplicationConfig, and the replication quotas (QuotaConfig.brokerQuotaConfigs)
        _d("follower.fetch.last.tiered.offset.enable", BOOLEAN, False, "Followers start from the last tiered offset."),
        _d("leader.replication.throttled.rate", LONG, LONG_MAX, "Leader-side replication rate cap.", at_least(0)),
        _d("follower.replication.throttled.rate", LONG, LONG_MAX, "Follower-side replication rate cap.", at_least(0)),
        _d(
            "replica.alter.log.dirs.io.max.bytes.per.second",
            LONG,
            LONG_MAX,
            "Rate cap of moves between log dirs.",
            at_least(0),
        ),
        # GroupCoordinatorConfig / ShareCoordinatorConfig.RECONFIGURABLE_CONFIGS. The assignment
        # intervals (Kafka 4.3, KIP-1263) take effect at each group's next heartbeat, capped
        # within the static min and max as GroupCoordinatorConfig.clampDynamicConfigs does;
        # the streams interval and the offload switches are stored only (no streams groups,
        # the assignor runs on the event loop).
        _d(
            "group.consumer.assignment.interval.ms",
            INT,
            1000,
            "The interval between assignment updates for a consumer group.",
            at_least(0),
        ),
        _d(
            "group.share.assignment.interval.ms",
            INT,
            1000,
            "The interval between assignment updates for a share group.",
            at_least(0),
        ),
        _d(
            "group.streams.assignment.interval.ms",
            INT,
            1000,
            "The interval between assignment updates for a streams group.",
            at_least(0),
        ),
        _d("group.consumer.assignor.offload.enable", BOOLEAN, True, "Offload consumer group assignment."),
        _d("group.share.assignor.offload.enable", BOOLEAN, True, "Offload share group assignment."),
        _d("group.streams.assignor.offload.enable", BOOLEAN, True, "Offload streams group assignment."),
        _d(
            "group.coordinator.cached.buffer.max.bytes",
            INT,
            1_048_588,
            "Largest write buffer kept for reuse.",
            at_least(524_288),
        ),
        _d(
            "share.coordinator.cached.buffer.max.bytes",
            INT,
            1_048_588,
            "Largest write buffer kept for reuse.",
            at_least(524_288),
        ),
    )
}

DYNAMIC_DEFS: dict[str, ConfigDef] = {**SECURITY_CONFIG_DEFS, **LISTENER_CONFIG_DEFS, **OTHER_DYNAMIC_DEFS}

# DynamicBrokerConfig.ClusterLevelListenerConfigs and PerBrokerConfigs: these three may also be
# cluster defaults; the other listener and security configs only per broker.
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
PER_BROKER_CONFIGS = frozenset(SECURITY_CONFIG_DEFS) | (
    frozenset(LISTENER_CONFIG_DEFS) - CLUSTER_LEVEL_LISTENER_CONFIGS
)

# Kafka broker configs that are not dynamic (DynamicConfig.Broker.nonDynamicProps), besides
# this server's own settings (configs.static_broker_configs): refused by name.
STATIC_ONLY = frozenset(
    {
        "process.roles",
        "node.id",
        "broker.id",
        "log.dirs",
        "log.dir",
        "metadata.log.dir",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
        "controller.listener.names",
        "inter.broker.listener.name",
        "security.inter.broker.protocol",
        "advertised.listeners",
        "broker.rack",
        "authorizer.class.name",
        "super.users",
        "early.start.listeners",
        "auto.create.topics.enable",
        "num.partitions",
        "default.replication.factor",
        "delete.topic.enable",
        "log.cleaner.enable",
        "log.retention.check.interval.ms",
        "log.message.format.version",
        "auto.leader.rebalance.enable",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "socket.request.max.bytes",
        "socket.listen.backlog.size",
        "connections.max.idle.ms",
        "connections.max.reauth.ms",
        "queued.max.requests",
        "request.timeout.ms",
        "replica.fetch.max.bytes",
        "replica.fetch.wait.max.ms",
        "replica.lag.time.max.ms",
        "replica.socket.timeout.ms",
        "fetch.max.bytes",
        "max.incremental.fetch.session.cache.slots",
        "offsets.topic.num.partitions",
        "offsets.topic.replication.factor",
        "offsets.topic.segment.bytes",
        "offsets.retention.minutes",
        "offsets.retention.check.interval.ms",
        "offsets.commit.timeout.ms",
        "offset.metadata.max.bytes",
        "transaction.state.log.num.partitions",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "transaction.max.timeout.ms",
        "transactional.id.expiration.ms",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "group.initial.rebalance.delay.ms",
        "group.min.session.timeout.ms",
        "group.max.session.timeout.ms",
        "group.max.size",
        "group.coordinator.rebalance.protocols",
        "group.coordinator.threads",
        "group.consumer.heartbeat.interval.ms",
        "group.consumer.session.timeout.ms",
        "group.consumer.max.size",
        "group.consumer.assignors",
        "group.consumer.migration.policy",
        "ssl.principal.mapping.rules",
        "sasl.mechanism.controller.protocol",
        "quota.window.num",
        "quota.window.size.seconds",
        "log.flush.offset.checkpoint.interval.ms",
    }
)

_LISTENER_PREFIXED = re.compile(r"listener\.name\.[^.]*\.(.*)")


def listener_base(name: str) -> str | None:
    """The config a listener.name.<listener>.<config> override names (Kafka's ListenerConfigRegex)."""
    m = _LISTENER_PREFIXED.fullmatch(name)
    return m.group(1) if m else None
