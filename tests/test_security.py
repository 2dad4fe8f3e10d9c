"""TLS and SASL (PLAIN, SCRAM-SHA-256/512) with real clients, and the SASL state machine
over raw frames: what is refused, with which error, and that the connection then closes."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.wire_client import WireClient, request_class
from protocol.messages import encode_request
from tests.support.cli import refused as in_process
from tests.support.process import ROOT

pytestmark = pytest.mark.slow  # real clients over TLS and SASL (servers in this process; start-up errors: processes)

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
USERS = "alice:alice-secret\nbob:b0b:with:colons\n"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """A throwaway CA, a server certificate for 127.0.0.1 / localhost and a client one (O=acme, CN=app)."""
    d = tmp_path_factory.mktemp("certs")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test-ca")
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    )
    openssl("req", *ec, "-keyout", "client.key", "-out", "client.csr", "-subj", "/O=acme/CN=app")
    openssl(
        "x509",
        "-req",
        "-in",
        "client.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "client.pem",
        "-days",
        "2",
    )
    return d


@pytest.fixture
def users_file(tmp_path):
    path = tmp_path / "users.txt"
    path.write_text(USERS)
    return path


def tls_args(certs) -> list[str]:
    return ["--ssl-certfile", str(certs / "server.pem"), "--ssl-keyfile", str(certs / "server.key")]


def group_round_trip(conf: dict, topic: str) -> None:
    """confluent-kafka: produce, then consume in a group and commit, over conf's security."""
    p = Producer({**conf, "enable.idempotence": True})
    for i in range(5):
        p.produce(topic, value=b"secret-%d" % i)
    assert p.flush(15) == 0
    c = Consumer(
        {**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        got += [m for m in c.consume(10, 0.5) if not m.error()]
    assert sorted(m.value() for m in got) == [b"secret-%d" % i for i in range(5)]
    # Keyless records may all land on one partition (librdkafka's sticky partitioner): one the
    # consumer read nothing from has no position, and commit() lists it as OFFSET_INVALID.
    committed = {tp.partition: tp.offset for tp in c.commit(asynchronous=False)}
    read = {m.partition() for m in got}
    assert sum(committed[p] for p in read) == 5
    assert all(committed[p] < 0 for p in committed.keys() - read)
    c.close()


def test_tls_with_confluent_and_kafka_python(server_factory, certs):
    s = server_factory("--security-protocol", "SSL", *tls_args(certs))
    conf = {"bootstrap.servers": s.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")}
    admin = AdminClient(conf)  # (kept: a client collected mid-call cancels it)
    admin.create_topics([NewTopic("tls", 2)])["tls"].result(15)
    group_round_trip(conf, "tls")

    from kafka import KafkaConsumer

    k = KafkaConsumer(
        "tls",
        bootstrap_servers=s.bootstrap,
        security_protocol="SSL",
        ssl_cafile=str(certs / "ca.pem"),
        group_id="kp",
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    assert len([m for _, m in zip(range(5), k)]) == 5  # (range first: a 6th next(k) would wait out consumer_timeout_ms)
    k.close()
    # a plaintext client gets no Kafka answer (the port speaks TLS only) and the log no traceback
    with socket.create_connection(("127.0.0.1", s.port), 5) as sock:
        sock.sendall(struct.pack(">ihhi", 10, 18, 0, 1) + b"\x00\x00")
        assert not sock.recv(100).startswith(struct.pack(">i", 1))
    assert "Traceback" not in s.log_text()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_sasl_ssl_group_life_cycle(server_factory, certs, users_file, mechanism):
    s = server_factory("--security-protocol", "SASL_SSL", *tls_args(certs), "--sasl-users", str(users_file))
    conf = {
        "bootstrap.servers": s.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(certs / "ca.pem"),
        "sasl.mechanisms": mechanism,
        "sasl.username": "bob",
        "sasl.password": "b0b:with:colons",
    }
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("sasl", 1)])["sasl"].result(15)
    group_round_trip(conf, "sasl")

    from kafka import KafkaConsumer

    k = KafkaConsumer(
        "sasl",
        bootstrap_servers=s.bootstrap,
        security_protocol="SASL_SSL",
        ssl_cafile=str(certs / "ca.pem"),
        sasl_mechanism=mechanism,
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
        group_id="kp",
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    assert len([m for _, m in zip(range(5), k)]) == 5  # (range first: a 6th next(k) would wait out consumer_timeout_ms)
    k.close()
    assert "alice-secret" not in s.log_text() and "b0b:with" not in s.log_text()


def test_wrong_password_is_refused(server_factory, users_file):
    s = server_factory("--security-protocol", "SASL_PLAINTEXT", "--sasl-users", str(users_file))
    errors = []
    admin = AdminClient(
        {
            "bootstrap.servers": s.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "Wr0ngPa55",
            "error_cb": errors.append,
        }
    )
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)  # (error callbacks are served by poll)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert "Wr0ngPa55" not in s.log_text()


async def handshake(conn: WireClient, mechanism: str):
    return await conn.request(SASL_HANDSHAKE, 1, request_class(SASL_HANDSHAKE, 1)(mechanism=mechanism))


async def authenticate(conn: WireClient, token: bytes, v: int = 2):
    return await conn.request(SASL_AUTHENTICATE, v, request_class(SASL_AUTHENTICATE, v)(auth_bytes=token))


async def closed(conn: WireClient) -> bool:
    try:
        await conn.request(18, 0, request_class(18, 0)())
    except ConnectionError:
        return True
    return False


async def test_sasl_state_machine_over_raw_frames(server_factory, users_file):
    s = server_factory(
        "--security-protocol",
        "SASL_PLAINTEXT",
        "--sasl-users",
        str(users_file),
        "--sasl-mechanisms",
        "PLAIN,SCRAM-SHA-256",
    )
    # another mechanism: refused, with the enabled ones
    conn = await WireClient("sasl").connect("127.0.0.1", s.port)
    r = await handshake(conn, "GSSAPI")
    assert (r.error_code, list(r.mechanisms)) == (33, ["PLAIN", "SCRAM-SHA-256"])  # UNSUPPORTED_SASL_MECHANISM
    await conn.close()
    # a wrong password: SASL_AUTHENTICATION_FAILED, then the connection is closed
    conn = await WireClient("sasl").connect("127.0.0.1", s.port)
    assert (await handshake(conn, "PLAIN")).error_code == 0
    r = await authenticate(conn, b"\0alice\0nope")
    assert r.error_code == 58 and "Invalid username or password" in r.error_message
    assert await closed(conn)
    # anything but ApiVersions / SASL before authenticating closes the connection, as Kafka
    conn = await WireClient("sasl").connect("127.0.0.1", s.port)
    with pytest.raises(ConnectionError):
        await conn.request(METADATA, 1, request_class(METADATA, 1)(topics=None))
    # the right password; then a second handshake is ILLEGAL_SASL_STATE
    conn = await WireClient("sasl").connect("127.0.0.1", s.port)
    assert (await handshake(conn, "PLAIN")).error_code == 0
    r = await authenticate(conn, b"\0alice\0alice-secret", v=1)
    assert (r.error_code, r.auth_bytes) == (0, b"")
    assert (await conn.request(METADATA, 1, request_class(METADATA, 1)(topics=None))).brokers
    r = await handshake(conn, "PLAIN")
    assert (r.error_code, r.mechanisms) == (34, ())  # ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers
    r = await authenticate(conn, b"\0alice\0alice-secret")
    assert (r.error_code, r.error_message) == (34, "SaslAuthenticate request received after successful authentication")
    # delegation tokens: a SASL connection may ask, but this broker, as Kafka without a secret
    # key, has them disabled (DELEGATION_TOKEN_AUTH_DISABLED); the connection serves on
    r = await conn.request(41, 3, request_class(41, 3)(owners=None))
    assert (r.error_code, r.tokens) == (61, ())
    await conn.close()
    # garbage SCRAM messages are an authentication failure, not a crash
    for token in (b"p=tls-unique,,n=alice,r=abc", b"n,,r=abc", b"\xff\xfe", b"n,,n=alice,r=abc"):
        conn = await WireClient("sasl").connect("127.0.0.1", s.port)
        assert (await handshake(conn, "SCRAM-SHA-256")).error_code == 0
        r = await authenticate(conn, token)
        if r.error_code == 0:  # a well-formed first message: then a bad proof
            r = await authenticate(conn, b"c=biws,r=abcXYZ,p=AAAA")
        assert r.error_code == 58
        await conn.close()
    assert "Traceback" not in s.log_text()


def test_security_startup_errors_are_one_line(tmp_path, certs):
    def start(*args: str) -> str:
        r = subprocess.run(
            [sys.executable, "-m", "coordinator", "--port", "0", "--data-dir", str(tmp_path / "d"), *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        return r.stderr

    def refused(*args: str) -> str:  # the others in process (cli.refused)
        return asyncio.run(in_process("--port", "0", "--data-dir", str(tmp_path / "d"), *args))

    assert "--security-protocol SSL needs --ssl-certfile" in start("--security-protocol", "SSL")
    listeners = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"
    assert "an SSL or SASL_SSL listener needs --ssl-certfile" in refused("--listeners", listeners)
    assert "needs --sasl-users" in refused("--security-protocol", "SASL_PLAINTEXT")
    assert "No such file" in refused("--security-protocol", "SASL_PLAINTEXT", "--sasl-users", str(tmp_path / "none"))
    bad = tmp_path / "bad-users"
    bad.write_text("nopassword\n")
    assert "line 1" in refused("--security-protocol", "SASL_PLAINTEXT", "--sasl-users", str(bad))
    assert "TLS certificate" in start(
        "--security-protocol",
        "SSL",
        "--ssl-certfile",
        str(certs / "ca.key"),
        "--ssl-keyfile",
        str(certs / "server.key"),
    )
    assert "supported: PLAIN" in refused(
        "--security-protocol", "SASL_PLAINTEXT", "--sasl-users", str(bad), "--sasl-mechanisms", "OAUTHBEARER"
    )
    assert "is not PROTOCOL://host:port" in refused("--listeners", "HTTP://127.0.0.1:0")
    assert "named twice" in refused("--listeners", "PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0")
    assert "needs --sasl-users" in refused("--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0")
    assert "not in --listeners" in refused(
        "--listeners", "PLAINTEXT://127.0.0.1:0", "--advertised-listeners", "SSL://example:9093"
    )
    assert not (tmp_path / "d").exists()


def test_scram_credentials_managed_by_admin_clients(server_factory, users_file):
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    s = server_factory("--security-protocol", "SASL_PLAINTEXT", "--sasl-users", str(users_file))
    as_alice = {
        "bootstrap.servers": s.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    admin = AdminClient(as_alice)
    sha512 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion("carol", sha512, b"carol-pw")])["carol"].result(15)
    described = admin.describe_user_scram_credentials(["carol", "alice"])
    carol = described["carol"].result(15)
    assert [(i.mechanism, i.iterations) for i in carol.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    assert len(described["alice"].result(15).scram_credential_infos) == 2  # from the users file
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(15)
    too_few = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000)
    with pytest.raises(Exception, match="UNACCEPTABLE_CREDENTIAL|Too few iterations"):
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion("dave", too_few, b"x")])["dave"].result(15)

    def list_topics_as(user: str, password: str) -> None:
        AdminClient({**as_alice, "sasl.username": user, "sasl.password": password}).list_topics(timeout=10)

    list_topics_as("carol", "carol-pw")  # the new user authenticates
    s.restart()  # kept in the data dir
    list_topics_as("carol", "carol-pw")
    admin = AdminClient(as_alice)
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)])[
        "alice"
    ].result(15)
    assert [
        i.mechanism for i in admin.describe_user_scram_credentials(["alice"])["alice"].result(15).scram_credential_infos
    ] == [ScramMechanism.SCRAM_SHA_512]
    assert "carol-pw" not in s.log_text()


def test_listeners_serve_several_protocols_at_once(tmp_path, certs, users_file):
    """--listeners: PLAINTEXT and SASL_SSL on two ports of one server; each client is told
    (Metadata) the address of the listener it came by, so it stays on its protocol."""
    from tests.support.process import ServerProcess, free_port

    sasl_port = free_port()
    s = ServerProcess(tmp_path / "data", [])
    s.extra_args = [
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{s.port},SASL_SSL://127.0.0.1:{sasl_port}",
        *tls_args(certs),
        "--sasl-users",
        str(users_file),
    ]
    s.start()
    try:
        plain = {"bootstrap.servers": s.bootstrap}
        secure = {
            "bootstrap.servers": f"127.0.0.1:{sasl_port}",
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(certs / "ca.pem"),
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
        for conf, port in ((plain, s.port), (secure, sasl_port)):
            admin = AdminClient(conf)
            brokers = admin.list_topics(timeout=10).brokers
            assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", port)]
        admin = AdminClient(plain)  # (kept: a client collected mid-call cancels it)
        for f in admin.create_topics([NewTopic("via-plain", 1, 1), NewTopic("via-sasl", 1, 1)]).values():
            f.result(15)
        group_round_trip(plain, "via-plain")
        group_round_trip(secure, "via-sasl")
        # the SASL port still wants authentication: a request before it closes the connection
        with socket.create_connection(("127.0.0.1", sasl_port)) as raw:
            ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(
                    encode_request(
                        3,
                        12,
                        1,
                        "x",
                        request_class(3, 12)(
                            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
                        ),
                    )
                )
                assert tls.recv(4) == b""
    finally:
        s.close()
    assert "listeners: PLAINTEXT://127.0.0.1" in s.log_text()


def test_sasl_handshake_v0_then_bare_tokens(server_factory, users_file):
    """SaslHandshake v0 (clients from before SaslAuthenticate): the SASL tokens then travel
    as bare size-prefixed frames; a wrong password closes the connection."""
    s = server_factory(
        "--security-protocol", "SASL_PLAINTEXT", "--sasl-users", str(users_file), "--sasl-mechanisms", "PLAIN"
    )

    def exchange(password: bytes) -> tuple[socket.socket, bytes]:
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        c.sendall(encode_request(SASL_HANDSHAKE, 0, 1, "old", request_class(SASL_HANDSHAKE, 0)(mechanism="PLAIN")))
        assert struct.unpack(">iih", c.recv(10))[2] == 0  # size, correlation id, error NONE (then mechanisms)
        c.recv(100)
        token = b"\0alice\0" + password
        c.sendall(struct.pack(">i", len(token)) + token)
        return c, c.recv(100)

    c, answer = exchange(b"alice-secret")
    assert answer == b"\0\0\0\0"  # an empty token: authenticated
    c.sendall(encode_request(METADATA, 1, 2, "old", request_class(METADATA, 1)(topics=None)))
    assert struct.unpack(">ii", c.recv(8))[1] == 2  # a Kafka answer to a Kafka request again
    c.close()
    c, answer = exchange(b"wrong")
    assert answer == b""  # closed
    c.close()
    assert "Traceback" not in s.log_text()


def test_tls_client_certificate_names_the_acl_principal(server_factory, certs):
    """With --ssl-client-auth required and no SASL, the principal is the client certificate's
    subject as Kafka writes it (User:CN=app,O=acme): ACLs for it apply."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    s = server_factory(
        "--security-protocol",
        "SSL",
        *tls_args(certs),
        "--ssl-client-auth",
        "required",
        "--ssl-cafile",
        str(certs / "ca.pem"),
        "--authorizer",
    )
    conf = {
        "bootstrap.servers": s.bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs / "ca.pem"),
        "ssl.certificate.location": str(certs / "client.pem"),
        "ssl.key.location": str(certs / "client.key"),
    }
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("certs", 1)])["certs"].result(15)
    deny = AclBinding(
        ResourceType.GROUP,
        "closed",
        ResourcePatternType.LITERAL,
        "User:CN=app,O=acme",
        "*",
        AclOperation.READ,
        AclPermissionType.DENY,
    )
    describe = AclBinding(
        ResourceType.GROUP,
        "closed",
        ResourcePatternType.LITERAL,
        "User:CN=app,O=acme",
        "*",
        AclOperation.DESCRIBE,
        AclPermissionType.ALLOW,
    )  # (finding the coordinator stays allowed)
    for f in admin.create_acls([deny, describe]).values():
        f.result(15)

    def commit(group: str):
        c = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
        try:
            c.commit(offsets=[TopicPartition("certs", 0, 1)], asynchronous=False)
            return None
        except KafkaException as e:
            return e.args[0].code()
        finally:
            c.close()

    assert commit("open") is None
    assert commit("closed") == KafkaError.GROUP_AUTHORIZATION_FAILED
