"""Kafka-style listeners: several ports at once, each with its security protocol
(`--listeners PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093`). A client is told,
in Metadata, FindCoordinator and DescribeCluster, the address of the listener it came
in by (Kafka's per-listener endpoints), so it stays on that protocol. Without
--listeners there is one, from --host, --port and --security-protocol.

With `--brokers N` every broker has its own set, the first broker's shifted by a stride:
broker i (node id --node-id + i) listens on each port + i x stride, where the stride is the
span of the first broker's ports (1 with one listener: consecutive ports; 2 for 9092 and
9093), so that no two brokers' ports meet; a port 0 stays 0 (any free port). Advertised
ports are shifted the same way, by their own span.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass
class Listener:
    protocol: str
    host: str
    port: int  # 0: any free port, known once bound
    advertised_host: str | None = None
    advertised_port: int | None = None
    node_id: int = 1  # the broker this port belongs to

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def advertised(self) -> tuple[str, int]:
        return self.advertised_host or self.host, self.advertised_port or self.port


def _parse(spec: str, what: str) -> dict[str, tuple[str, int]]:
    """PROTOCOL://host:port,... -> {protocol: (host, port)}; ValueError says what is wrong."""
    out: dict[str, tuple[str, int]] = {}
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        protocol, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or protocol not in PROTOCOLS or not port.isdigit() or int(port) > 65535:
            raise ValueError(f"{what}: {item!r} is not PROTOCOL://host:port (protocols: {', '.join(PROTOCOLS)})")
        if protocol in out:
            raise ValueError(f"{what}: {protocol} is named twice (one listener per protocol)")
        out[protocol] = (host.strip("[]") or "0.0.0.0", int(port))
    if not out:
        raise ValueError(f"{what}: no listener given")
    return out


def listeners_of(config: Any) -> list[Listener]:
    """Every broker's listeners, the first broker's first."""
    brokers = getattr(config, "brokers", 1)
    if brokers < 1:
        raise ValueError(f"--brokers: {brokers}; at least 1")
    first = _listeners_of_one(config)
    for one in first:  # the first broker's own ports, named by the flag that gave them
        for flag, port in (("--port", one.port), ("--advertised-port", one.advertised_port or 0)):
            if not 0 <= port <= 65535:
                raise ValueError(f"{flag} {port}: not a port (0-65535)")
    stride = _span([x.port for x in first])
    advertised_stride = _span([x.advertised_port or 0 for x in first])
    out = []
    for i in range(brokers):
        for one in _listeners_of_one(config):
            one.node_id = config.node_id + i
            if i:
                one.port = one.port + i * stride if one.port else 0
                if one.advertised_port:
                    one.advertised_port += i * advertised_stride
            if one.port > 65535 or (one.advertised_port or 0) > 65535:
                raise ValueError(f"--brokers {brokers}: broker {one.node_id}'s port is past 65535")
            out.append(one)
    return out


def _span(ports: list[int]) -> int:
    """How far apart two brokers' ports are: the span of one broker's (given) ports."""
    given = [p for p in ports if p]
    return max(given) - min(given) + 1 if given else 1


def _listeners_of_one(config: Any) -> list[Listener]:
    if not config.listeners:
        return [
            Listener(config.security_protocol, config.host, config.port, config.advertised_host, config.advertised_port)
        ]
    bound = _parse(config.listeners, "--listeners")
    advertised = _parse(config.advertised_listeners, "--advertised-listeners") if config.advertised_listeners else {}
    unknown = set(advertised) - set(bound)
    if unknown:
        raise ValueError(f"--advertised-listeners: {', '.join(sorted(unknown))} is not in --listeners")
    return [Listener(p, h, port, *advertised.get(p, (None, None))) for p, (h, port) in bound.items()]
