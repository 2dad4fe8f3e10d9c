"""`--profile NAME`: a set of settings for one use, each a flag's value that flags and
KCOORD_* variables given explicitly still override.

client-suite: what the integration suites of client libraries expect of the broker they run
against (librdkafka's tests/, kafka-go's docker-compose): a SASL_PLAINTEXT listener beside the
plaintext one (the port after it), SASL PLAIN and SCRAM with the suites' users, the authorizer
on and open to everyone no ACL names, auto-created topics, a log cleaner that looks at
compacted logs every second, Kafka's 3 s initial rebalance delay for new classic groups,
KIP-848 groups allowed short session timeouts, and share groups the 1000 ms record locks
librdkafka's CI allows its brokers. docs/client-suites.md says which suite needs what.

test: a server for tests (coordinator.testing and the pytest fixtures use it): nothing waits on
a production default. Groups rebalance and assign at once (initial delay 0, assignment
intervals 0), KIP-848 and share members heartbeat every TEST_HEARTBEAT_INTERVAL_MS so they learn
a new target within a fraction of a second, a regex subscription is resolved again at every
topic created, the minimums a test may set through group configs
are lowered (heartbeat intervals, session timeouts, record locks), and appends are not fsynced.
docs/operations.md lists the settings.
"""

from __future__ import annotations

from typing import Any

# The users the suites log in as: librdkafka's trivup default, kafka-go's docker-compose.
CLIENT_SUITE_USERS = {
    "testuser": "testpass",
    "adminplain": "admin-secret",
    "adminscram256": "admin-secret-256",
    "adminscram512": "admin-secret-512",
}


def _client_suite(values: dict[str, Any]) -> dict[str, Any]:
    host, port = values["host"], values["port"]
    return {
        "listeners": f"PLAINTEXT://{host}:{port},SASL_PLAINTEXT://{host}:{port + 1 if port else 0}",
        "sasl_mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "authorizer": True,
        "allow_everyone_if_no_acl_found": True,
        "super_users": ";".join(f"User:{u}" for u in CLIENT_SUITE_USERS if u.startswith("admin")),
        "auto_create_topics": True,
        "log_cleaner_backoff_ms": 1000,
        # (Kafka's default, which the suites' brokers keep: kafka-go's readers join before their
        # topic exists and get its partitions only because the first join lasts this long)
        "group_initial_rebalance_delay_ms": 3000,
        # (librdkafka's trivup scenario: its KIP-848 tests give groups short session timeouts)
        "group_consumer_min_session_timeout_ms": 1,
        "group_consumer_min_heartbeat_interval_ms": 1,
        # (librdkafka's CI brokers: group.share.min.record.lock.duration.ms=1000, Kafka's least)
        "group_share_min_record_lock_duration_ms": 1000,
    }


TEST_HEARTBEAT_INTERVAL_MS = 250  # KIP-848 and share members: a new target reaches them this fast


def _test(values: dict[str, Any]) -> dict[str, Any]:
    return {
        "fsync": "never",
        "group_initial_rebalance_delay_ms": 0,
        "group_min_session_timeout_ms": 1,  # classic groups: a test's short session.timeout.ms
        "group_consumer_assignment_interval_ms": 0,
        "group_consumer_regex_min_refresh_interval_ms": 0,
        "group_consumer_heartbeat_interval_ms": TEST_HEARTBEAT_INTERVAL_MS,
        "group_consumer_min_heartbeat_interval_ms": 1,
        "group_consumer_min_session_timeout_ms": 1,
        "group_share_assignment_interval_ms": 0,
        "group_share_heartbeat_interval_ms": TEST_HEARTBEAT_INTERVAL_MS,
        "group_share_min_heartbeat_interval_ms": 1,
        "group_share_min_session_timeout_ms": 1,
        "group_share_min_record_lock_duration_ms": 1000,  # Kafka's least, what librdkafka's CI sets
        # Streams groups (KIP-1071) alike, from when the server has their settings:
        **{
            name: value
            for name, value in (
                ("group_streams_initial_rebalance_delay_ms", 0),
                ("group_streams_assignment_interval_ms", 0),
                ("group_streams_heartbeat_interval_ms", TEST_HEARTBEAT_INTERVAL_MS),
                ("group_streams_min_heartbeat_interval_ms", 1),
                ("group_streams_min_session_timeout_ms", 1),
            )
            if name in values
        },
    }


PROFILES = {"client-suite": _client_suite, "test": _test}


def apply_profile(values: dict[str, Any], explicit: set[str]) -> dict[str, Any]:
    """The settings with the profile's values for those not given explicitly."""
    name = values.get("profile")
    if not name:
        return values
    if "security_protocol" in explicit:  # (the profile's listeners would replace it)
        explicit = explicit | {"listeners"}
    return {**values, **{k: v for k, v in PROFILES[name](values).items() if k not in explicit}}


def profile_users(name: str | None) -> dict[str, str] | None:
    """user -> password of a profile that brings its own SASL users (None: it does not)."""
    return dict(CLIENT_SUITE_USERS) if name == "client-suite" else None
