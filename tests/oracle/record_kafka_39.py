"""Record what a real Apache Kafka 3.9 node lists in ApiVersions: the record
(tests/oracle/kafka-3.9-api-versions.json) that tests/test_kafka_release.py holds
`--kafka-version 3.9` to, so that no 3.9 broker has to start in a test run.

    cd tests/oracle/kafka-3.9 && mvn -q -B dependency:copy-dependencies -DoutputDirectory=target/lib
    .venv/bin/python -m tests.oracle.record_kafka_39

starts one KRaft node (broker and controller in one process, as the 4.4 oracle's) from those
jars, asks ApiVersions v4 (3.9's highest) and writes every API's range and the supported and finalized features."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.kafka_oracle import KafkaNode
from tests.support.raw_wire import Wire

HERE = Path(__file__).resolve().parent
LIB = HERE / "kafka-3.9" / "target" / "lib"
RECORD = HERE / "kafka-3.9-api-versions.json"


def java(main: str, *args: str, heap: str) -> list[str]:
    return ["java", f"-Xmx{heap}", "-XX:+UseSerialGC", "-cp", f"{LIB}/*", main, *args]


def main() -> None:
    jar = next(LIB.glob("kafka_2.13-*.jar"), None)
    if jar is None:
        sys.exit(f"no kafka_2.13 jar in {LIB}: resolve them first (see this script's docstring)")
    version = jar.name.removeprefix("kafka_2.13-").removesuffix(".jar")
    with tempfile.TemporaryDirectory() as tmp:
        node = KafkaNode(Path(tmp))  # (its ports, properties and cluster id; started here with 3.9's jars)
        props = Path(tmp) / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in node.properties().items()))
        log = open(Path(tmp) / "kafka.log", "wb")
        subprocess.run(
            java("kafka.tools.StorageTool", "format", "-t", node.cluster_id, "-c", str(props), heap="256m"),
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
        )
        proc = subprocess.Popen(java("kafka.Kafka", str(props), heap="768m"), stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while not node._answers():  # (Metadata lists the node as a broker: it registered)
                if proc.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"Kafka {version} did not start:\n{(Path(tmp) / 'kafka.log').read_text()[-3000:]}")
                time.sleep(0.3)
            w = Wire(node.port)
            # (v4: v3 leaves out the features whose lowest level is 0, KAFKA-17011)
            body = w.call(18, 4, client_software_name="record", client_software_version="1")
            w.close()
        finally:
            proc.terminate()
            proc.wait(30)
    record = {
        "kafka_version": version,
        "api_versions": {str(k.api_key): [k.min_version, k.max_version] for k in body.api_keys},
        "supported_features": {f.name: [f.min_version, f.max_version] for f in body.supported_features},
        "finalized_features": {f.name: f.max_version_level for f in body.finalized_features},
    }
    RECORD.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {RECORD}: Kafka {version}, {len(record['api_versions'])} APIs")


if __name__ == "__main__":
    main()
