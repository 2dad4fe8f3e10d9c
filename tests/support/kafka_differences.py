"""Where this server answers differently from Apache Kafka 4.4: the table the differential suite
(tests/test_kafka_oracle.py) holds its observations to, and docs/kafka-differences.md, its
rendering.

Each difference the suite can observe has a stable key, `<level>/<scenario>` (level: wire,
client or tools). A test of the suite compares Kafka's answers with ours for the keys it
checks; it fails when one differs and is not in DIFFERENCES (add an entry: its failure
message prints one to paste), and when one is in DIFFERENCES but no longer differs (delete
that entry). After editing the table, regenerate the page:

    python -m tests.support.kafka_differences --write

(tests/test_kafka_differences_page.py checks that the committed page is the rendering)."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import datetime
import enum
import json
import os
import re
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from tests.support.process import ROOT

PAGE = ROOT / "docs" / "kafka-differences.md"

GAP = "gap"  # to fix: Kafka 4.4's behaviour is the target
DELIBERATE = "deliberate"  # kept on purpose, for the reason given

PARITY = "not implemented yet (Kafka 4.4 parity)"


@dataclass(frozen=True)
class Difference:
    key: str  # `<level>/<scenario>`, as the suite names what it compares
    what: str  # what differs, in a sentence: Kafka's answer, then ours
    reason: str  # why: the missing piece for a gap, the argument for a deliberate one
    kind: Literal["gap", "deliberate"] = GAP


def _d(key: str, what: str, reason: str = PARITY, kind: Literal["gap", "deliberate"] = GAP) -> Difference:
    return Difference(key, what, reason, kind)


# Reasons several entries share.
NEWER = "the newer versions are not implemented yet (Kafka 4.4 parity)"
INTERBROKER = (
    "an inter-broker or controller API: this server runs no separate brokers, controllers or share-state"
    " coordinators that would call it"
)


# One entry per difference, sorted by key within each level. Keep `what` to what a user sees.
DIFFERENCES: tuple[Difference, ...] = (
    # -- wire: ApiVersions
    _d("wire/ApiVersions/range/AddRaftVoter", "Kafka serves v0-1; here not served", INTERBROKER, DELIBERATE),
    _d("wire/ApiVersions/range/DeleteShareGroupState", "Kafka serves v0; here not served", INTERBROKER, DELIBERATE),
    _d("wire/ApiVersions/range/InitializeShareGroupState", "Kafka serves v0; here not served", INTERBROKER, DELIBERATE),
    _d("wire/ApiVersions/range/ReadShareGroupState", "Kafka serves v0; here not served", INTERBROKER, DELIBERATE),
    _d(
        "wire/ApiVersions/range/ReadShareGroupStateSummary",
        "Kafka serves v0-1; here not served",
        INTERBROKER,
        DELIBERATE,
    ),
    _d("wire/ApiVersions/range/RemoveRaftVoter", "Kafka serves v0; here not served", INTERBROKER, DELIBERATE),
    _d(
        "wire/ApiVersions/range/UnregisterController",
        "Kafka serves v0 (new in 4.4); here not served",
        INTERBROKER,
        DELIBERATE,
    ),
    _d("wire/ApiVersions/range/UnregisterBroker", "Kafka serves v0; here not served", INTERBROKER, DELIBERATE),
    _d("wire/ApiVersions/range/WriteShareGroupState", "Kafka serves v0-1; here not served", INTERBROKER, DELIBERATE),
    # -- wire: DescribeConfigs
    _d(
        "wire/DescribeConfigs/broker-logger-names",
        "BROKER_LOGGER lists each broker's own loggers: Kafka its log4j loggers (root, the configured ones and"
        " one per Java class that logs), here root, the Kafka names of ALIASES and the server's Python loggers",
        "the loggers are the two programs' own; the entries' shape, the levels of root and kafka, their changes"
        " and refusals are compared and equal (docs/operations.md#logging maps the names)",
        DELIBERATE,
    ),
    # -- wire: a request of every API with every field at its default or zero
    _d(
        "wire/DescribeLogDirs/empty-request",
        "all partitions: Kafka lists the topics and their partitions in its hash maps' order, here by name and"
        " partition",
        "the order of Kafka's HashMap iteration, which no client relies on",
        DELIBERATE,
    ),
    # -- tools
    _d(
        "tools/kafka-broker-api-versions/list",
        "the API lines differ as ApiVersions' ranges do (wire/ApiVersions/range/*): the inter-broker and"
        " controller APIs Kafka lists and this server does not",
        "as the ApiVersions ranges above: " + INTERBROKER,
        DELIBERATE,
    ),
    _d(
        "tools/kafka-configs/describe-broker-all",
        "advertised.listeners, controller.listener.names, controller.quorum.voters, inter.broker.listener.name,"
        " listeners and listener.security.protocol.map: Kafka shows its node's static settings (a CONTROLLER"
        " listener), here this server's own (its served listeners, no controller listener)",
        "each broker describes its own settings; this server has no separate controller listener to show",
        DELIBERATE,
    ),
    _d(
        "tools/kafka-metadata-quorum/describe-status",
        "Kafka's high watermark is its metadata log's offset, here the count of catalog changes since start;"
        " the voter's endpoint is Kafka's CONTROLLER listener, here the broker's own address",
        "this server keeps no KRaft metadata log and has no controller listener: its one node is broker and"
        " controller on one port",
        DELIBERATE,
    ),
)


KNOWN: dict[str, Difference] = {d.key: d for d in DIFFERENCES}


# ---------------------------------------------------------------------------------------------
# Comparing answers


# Fields whose values must differ between two brokers (ids drawn at random, addresses, clocks,
# allocation counters): compared only as "set" or "unset".
MASKED_FIELDS = {
    "cluster_id",
    "topic_id",
    "host",
    "port",
    "member_id",
    "leader_id_and_epoch",
    "producer_id",
    "session_id",
    "log_dir",
    "finalized_features_epoch",
    "finalized_epoch",
    "transaction_start_time_ms",
    "transaction_start_time",
    "last_timestamp",
    "log_append_time_ms",
    "log_append_time",
    "timestamp",
    "epoch",
}
DROPPED_FIELDS = {"throttle_time_ms", "throttle_time"}
UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# The bounds an out-of-range timestamp's message names are computed from each broker's clock.
TIMESTAMP_BOUNDS = re.compile(r"should be within \[-?\d+, -?\d+\]")


def plain(value: Any, field: str = "") -> Any:
    """A kio entity (or anything in one) as JSON-like data, with what must differ masked."""
    if field in DROPPED_FIELDS:
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: plain(getattr(value, f.name), f.name)
            for f in dataclasses.fields(value)
            if f.name not in DROPPED_FIELDS
        }
    if isinstance(value, dict):
        return {str(k): plain(v, str(k)) for k, v in value.items() if k not in DROPPED_FIELDS}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):  # a client library's named tuple
        return plain(value._asdict(), field)
    if isinstance(value, tuple | list | set | frozenset):
        items = [plain(v, field) for v in value]
        return items if not isinstance(value, set | frozenset) else sorted(items, key=json.dumps)
    if isinstance(value, enum.Enum):  # (before the next case: an ErrorCode has attributes too)
        return value.name
    if hasattr(value, "__dict__") and not isinstance(value, type) and type(value).__module__ != "builtins":
        return plain({k: v for k, v in vars(value).items() if not k.startswith("_")}, field)
    if isinstance(value, datetime.timedelta):
        value = value // datetime.timedelta(milliseconds=1)
    if isinstance(value, uuid.UUID):
        value = str(value) if value.int else ""
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value)} bytes>"
    if field in MASKED_FIELDS and value not in (None, "", -1, 0):
        return "<set>"
    if isinstance(value, str):
        return TIMESTAMP_BOUNDS.sub("should be within [<now - before>, <now + after>]", UUID_TEXT.sub("<uuid>", value))
    return value


def diff(kafka: Any, ours: Any, path: str = "") -> list[str]:
    """Where two plain values differ, one line per leaf: `path: kafka=… ours=…`."""
    if isinstance(kafka, dict) and isinstance(ours, dict):
        lines = []
        for k in [*kafka, *(k for k in ours if k not in kafka)]:
            lines += diff(kafka.get(k, "<absent>"), ours.get(k, "<absent>"), f"{path}.{k}" if path else str(k))
        return lines
    if _lines(kafka) and _lines(ours) and kafka != ours:  # a tool's output: which lines differ
        changed = [d for d in difflib.ndiff(kafka, ours) if d[:1] in "-+"]
        return [f"{path}: {'kafka' if d[0] == '-' else 'ours '} {d[2:]}" for d in changed]
    if _named(kafka) and _named(ours):  # configs and the like: matched by name, in any order
        return diff({e["name"]: e for e in kafka}, {e["name"]: e for e in ours}, path)
    if isinstance(kafka, list) and isinstance(ours, list) and len(kafka) == len(ours):
        lines = []
        for i, (a, b) in enumerate(zip(kafka, ours, strict=True)):
            lines += diff(a, b, f"{path}[{i}]")
        return lines
    if kafka != ours:
        return [f"{path or '.'}: kafka={_short(kafka)} ours={_short(ours)}"]
    return []


def _lines(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(e, str) for e in value)


def _named(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) > 1
        and all(isinstance(e, dict) and isinstance(e.get("name"), str) for e in value)
        and len({e["name"] for e in value}) == len(value)
    )


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


class Observations:
    """What one test of the suite compared: the keys it checked and, per key, where the two
    brokers differed."""

    def __init__(self) -> None:
        self.checked: list[str] = []
        self.differing: dict[str, list[str]] = {}

    def compare(self, key: str, kafka: Any, ours: Any, where: str = "") -> None:
        if key not in self.checked:
            self.checked.append(key)
        lines = diff(kafka, ours, where)
        if lines:
            self.differing.setdefault(key, []).extend(lines)

    def problems(self) -> list[str]:
        found = []
        for key in self.checked:
            lines = self.differing.get(key)
            if lines and key not in KNOWN:
                shown = "\n      ".join(lines[:25]) + (f"\n      … {len(lines) - 25} more" if len(lines) > 25 else "")
                found.append(
                    f"{key}: Kafka 4.4 and this server differ, and tests/support/kafka_differences.py does not"
                    f" list it. Fix the server, or add to DIFFERENCES\n"
                    f"    _d({key!r}, 'Kafka …; here …'),\n"
                    f"  and run `python -m tests.support.kafka_differences --write`. Where:\n      {shown}"
                )
            elif not lines and key in KNOWN:
                found.append(
                    f"{key}: listed in tests/support/kafka_differences.py but Kafka 4.4 and this server now"
                    " answer the same: delete its entry and run `python -m tests.support.kafka_differences --write`"
                )
        return found

    def check(self) -> None:
        dump = os.environ.get("KAFKA_ORACLE_DUMP")
        if dump:  # (a maintainer's aid: every difference seen, to write entries from)
            with open(dump, "a") as f:
                for key in self.checked:
                    f.write(json.dumps({"key": key, "lines": self.differing.get(key, [])}) + "\n")
        problems = self.problems()
        assert not problems, "\n\n".join(problems)


# ---------------------------------------------------------------------------------------------
# The page

HEADER = """\
# Differences from Apache Kafka 4.4

<!-- Generated from tests/support/kafka_differences.py by
     `python -m tests.support.kafka_differences --write`: edit the table there, not this page. -->

The differential suite (`tests/test_kafka_oracle.py`) starts one real Apache Kafka 4.4 node
(KRaft, broker and controller in one process) and one of this server, runs the same scenarios
against both and compares their answers field by field, after masking only what must differ
between two brokers (cluster and topic ids, member and producer ids, host names, ports,
timestamps, data paths, throttle times). It runs at four levels:

- **wire**: raw requests of every API both serve, at every version both serve, built and read
  with kio, including error paths;
- **client**: confluent-kafka's and kafka-python's admin calls and group life cycles, as their
  describe calls report them;
- **tools**: Kafka 4.4's own command-line tools (kafka-topics, kafka-configs, kafka-features,
  …), run in one JVM by `tests/oracle`'s launcher, their outputs compared after the same
  masking;
- **records**: what a group's life writes to `__consumer_offsets`, fetched from both and
  decoded record by record, in order (KIP-848 groups with a regex, classic groups converted).

Every difference it observes is listed below with its reason: a **gap** is to be fixed (Kafka
4.4's answer is the target), a **deliberate** one is kept on purpose. The suite fails on a
difference that is not listed and on a listed one that no longer occurs, so this page stays
true. To update it, edit `DIFFERENCES` in `tests/support/kafka_differences.py` (one entry per
key; a failing test prints the entry to add or names the one to delete), then run
`python -m tests.support.kafka_differences --write`. A change that makes this server answer
as Kafka does removes an entry here in the same commit: run the suite before merging (without
`make oracle`'s jars it is skipped, and a stale entry goes unnoticed).

Running it: `make oracle` resolves Kafka 4.4's jars with Maven (`tests/oracle/pom.xml`; the first
run downloads them, later runs are offline) and `make test` runs it; it needs Java 17 and Maven,
and is skipped, saying why, without them. One file:
`.venv/bin/python -m pytest tests/test_kafka_oracle.py -q`.
"""

LEVELS = (
    ("wire", "Wire level"),
    ("client", "Client level"),
    ("tools", "Command-line tools"),
    ("records", "__consumer_offsets records"),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    out = [HEADER]
    gaps = sum(d.kind == GAP for d in DIFFERENCES)
    out.append(f"{len(DIFFERENCES)} differences: {gaps} gaps, {len(DIFFERENCES) - gaps} deliberate.\n")
    for level, title in LEVELS:
        rows = sorted((d for d in DIFFERENCES if d.key.split("/", 1)[0] == level), key=lambda d: d.key)
        out.append(f"\n## {title}\n")
        if not rows:
            out.append("\nNone observed.\n")
            continue
        out.append("\n| key | what differs | kind | reason |\n|---|---|---|---|\n")
        out += [f"| `{d.key}` | {_cell(d.what)} | {d.kind} | {_cell(d.reason)} |\n" for d in rows]
    return "".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description="render docs/kafka-differences.md from DIFFERENCES")
    parser.add_argument("--write", action="store_true", help="write the page (default: print it)")
    args = parser.parse_args()
    if args.write:
        PAGE.write_text(render())
    else:
        print(render(), end="")


if __name__ == "__main__":
    main()
