"""`--profile client-suite`: the broker a client library's own integration suite expects
starts, and both its listeners answer: plaintext, and SASL_PLAINTEXT with the suites' users
(PLAIN and SCRAM); the authorizer is on and open; explicit flags win over the profile."""

from __future__ import annotations

import pytest

import subprocess
import sys

from tests.support.process import ROOT, ServerProcess, free_port

pytestmark = [pytest.mark.slow, pytest.mark.process]  # real client libraries through whole group life cycles


def _port_pair() -> int:
    """A free port whose next port is free too (the profile's SASL listener)."""
    import socket

    while True:
        port = free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port


def _incremental_group(port: int, group: str, settings: dict[str, str]) -> int:
    import asyncio

    from tests.support.configs import incremental
    from tests.support.wire_client import WireClient

    async def call() -> int:
        conn = await WireClient("suite").connect("127.0.0.1", port)
        try:
            return (await incremental(conn, 32, group, [(k, 0, v) for k, v in settings.items()]))[0]
        finally:
            await conn.close()

    return asyncio.run(call())


def test_both_listeners_answer(tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ConfigResource,
        ResourcePatternType,
        ResourceType,
    )

    server = ServerProcess(tmp_path / "data", ["--profile", "client-suite"])
    server.port = _port_pair()
    server.start()
    try:
        plain = {"bootstrap.servers": server.bootstrap}
        sasl = [
            {
                "bootstrap.servers": f"127.0.0.1:{server.port + 1}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism,
                "sasl.username": user,
                "sasl.password": password,
            }
            for mechanism, user, password in (
                ("PLAIN", "testuser", "testpass"),
                ("SCRAM-SHA-512", "adminscram512", "admin-secret-512"),
                ("SCRAM-SHA-256", "adminscram256", "admin-secret-256"),
            )
        ]
        # auto-creation, produced on the plaintext port, read on the SASL one
        producer = Producer(plain)
        producer.produce("suite-topic", value=b"hello")
        assert producer.flush(30) == 0
        for conf in sasl:
            consumer = Consumer({**conf, "group.id": "suite-" + conf["sasl.mechanism"], "enable.auto.commit": False})
            consumer.assign([TopicPartition("suite-topic", 0, 0)])
            msg = None
            for _ in range(100):
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    break
            consumer.close()
            assert msg is not None and msg.value() == b"hello", conf["sasl.mechanism"]
        # the authorizer is on (the ACL APIs answer) and lets everyone in while no ACL names a resource
        admin = AdminClient(sasl[1])
        acls = admin.describe_acls(
            AclBindingFilter(
                ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
            )
        ).result(30)
        assert acls == []
        broker = ConfigResource(ResourceType.BROKER, "1")
        plain_admin = AdminClient(plain)  # (held: a client collected mid-request fails it)
        entries = plain_admin.describe_configs([broker])[broker].result(30)
        assert entries["log.cleaner.backoff.ms"].value == "1000"
        assert entries["auto.create.topics.enable"].value == "true"
        # KIP-848 groups may be given short session timeouts (librdkafka's scenario)
        assert (
            _incremental_group(
                server.port, "g", {"consumer.session.timeout.ms": "500", "consumer.heartbeat.interval.ms": "100"}
            )
            == 0
        )
    finally:
        server.close()
    assert "Traceback" not in server.log_text()


def test_explicit_flags_win(server_factory):
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    # (--security-protocol given: the profile's two listeners are not made, one plaintext port is)
    server = server_factory(
        "--profile", "client-suite", "--security-protocol", "PLAINTEXT", "--log-cleaner-backoff-ms", "5000"
    )
    broker = ConfigResource(ResourceType.BROKER, "1")
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    entries = admin.describe_configs([broker])[broker].result(30)
    assert entries["log.cleaner.backoff.ms"].value == "5000"


def test_unknown_profile_is_one_line():
    r = subprocess.run(
        [sys.executable, "-m", "coordinator", "--profile", "nope"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "--profile" in r.stderr and len(r.stderr.strip().splitlines()) == 1
