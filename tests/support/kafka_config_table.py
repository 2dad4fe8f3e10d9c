"""Writes coordinator/broker/kafka_configs.json, Kafka's own config table, from a real Kafka
broker's DescribeConfigs answers (with synonyms and documentation): every broker config's name,
type, default, whether it is dynamic and its documentation; the topic and group configs' names,
types, defaults and documentation.

    python -m tests.support.kafka_config_table --port 9092 [--topic T] [--version 4.4]

(--version 3.9, against a Kafka 3.9 broker, writes kafka_configs_3.9.json, what
--kafka-version 3.9 lists.)

The broker is one with no dynamic config set and a topic with no override (created first
unless --topic names one). The defaults come from each config's DEFAULT_CONFIG synonym, so the
broker's own static settings (listeners, log.dirs, replication factors) do not leak into the
table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from tests.support import configs as C
from tests.support.data_plane import create
from tests.support.wire_client import WireClient

TABLES = Path(__file__).resolve().parents[2] / "coordinator" / "broker"


def out_path(version: str) -> Path:
    """4.4's table is kafka_configs.json; an older release's kafka_configs_<version>.json."""
    return TABLES / ("kafka_configs.json" if version == "4.4" else f"kafka_configs_{version}.json")


GROUP = 32


def _default(c: Any) -> str | None:
    for s in c.synonyms:
        if s.name == c.name and s.source == C.DEFAULT:
            return s.value
    return None


async def table(port: int, topic: str | None, version: str) -> dict[str, Any]:
    conn = await WireClient().connect("127.0.0.1", port)
    if topic is None:
        topic = "kafka-config-table"
        await create(conn, topic, partitions=1)
    broker = await C.describe(conn, C.BROKER, "1", docs=True)
    top = await C.describe(conn, C.TOPIC, topic, docs=True)
    group = await C.describe(conn, GROUP, "kafka-config-table", docs=True)
    return {
        "kafka": version,
        # [name, type, default, dynamic, documentation]
        "broker": sorted(
            [c.name, int(c.config_type), _default(c), not c.read_only, c.documentation] for c in broker.configs
        ),
        # [name, type, default, documentation]
        "topic": sorted([c.name, int(c.config_type), c.value, c.documentation] for c in top.configs),
        # [name, type, default, broker config, documentation]
        "group": sorted(
            [c.name, int(c.config_type), c.value, c.synonyms[0].name, c.documentation] for c in group.configs
        ),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=9092)
    p.add_argument("--topic")
    p.add_argument("--version", default="4.4")
    a = p.parse_args()
    data = asyncio.run(table(a.port, a.topic, a.version))
    out = out_path(a.version)
    with out.open("w") as f:  # one config a line: a new Kafka's table reads as a short diff
        f.write("{\n")
        for i, key in enumerate(("kafka", "broker", "topic", "group")):
            value = data[key]
            f.write(f"{json.dumps(key)}: ")
            if isinstance(value, list):
                f.write("[\n" + ",\n".join(json.dumps(row) for row in value) + "\n]")
            else:
                f.write(json.dumps(value))
            f.write(",\n" if i < 3 else "\n")
        f.write("}\n")
    print(f"{out}: {len(data['broker'])} broker, {len(data['topic'])} topic, {len(data['group'])} group configs")


if __name__ == "__main__":
    main()
