"""Client-metrics config resources (KIP-714, resource type 16): the subscriptions
`kafka-client-metrics` alters, describes, lists and deletes, kept in `client-metrics.json` in the
data dir and checked as Kafka's ClientMetricsConfigs checks them. They are kept and described
only: this server serves no telemetry (GetTelemetrySubscriptions / PushTelemetry), so no client
is ever sent a subscription.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode as E

from ..durable import NamedConfigs
from .config_defs import DEFAULT_CONFIG, INT, LIST, ConfigError
from .configs import Entry

DYNAMIC_CLIENT_METRICS_CONFIG = 7  # the config source Kafka describes a subscription's own settings with
INTERVAL, MATCH, METRICS = "interval.ms", "match", "metrics"
# name -> (type, default, documentation), in the order Kafka describes them
DEFINITIONS = {
    INTERVAL: (INT, "300000", "Metrics push interval in milliseconds"),
    MATCH: (LIST, "", "Client match criteria"),
    METRICS: (LIST, "", "Telemetry metric name prefix list"),
}
MATCH_KEYS = frozenset(
    {
        "client_instance_id",
        "client_id",
        "client_software_name",
        "client_software_version",
        "client_source_address",
        "client_source_port",
    }
)
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000


def _stored(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {str(name): {str(k): str(v) for k, v in configs.items()} for name, configs in doc.items()}


class ClientMetricsConfigs(NamedConfigs):
    def __init__(self, data_dir: Path | None) -> None:
        super().__init__(Path(data_dir) / "client-metrics.json" if data_dir is not None else None, _stored)

    def names(self) -> list[str]:
        """The subscriptions with settings of their own (ListConfigResources)."""
        return [name for name, own in self.configs.items() if own]

    def describe(self, name: str) -> list[Entry]:
        """Every config of the subscription: its own value, else the default (an unknown name is
        described with the defaults, as Kafka does)."""
        if not name:
            raise ConfigError("Client metrics subscription name must not be empty", E.invalid_request)
        own = self.configs.get(name, {})
        out = []
        for key, (kind, default, doc) in DEFINITIONS.items():
            if key in own:
                value = own[key]
                out.append(
                    Entry(
                        key,
                        value,
                        DYNAMIC_CLIENT_METRICS_CONFIG,
                        False,
                        kind,
                        doc,
                        ((key, value, DYNAMIC_CLIENT_METRICS_CONFIG),),
                    )
                )
            else:
                out.append(Entry(key, default, DEFAULT_CONFIG, False, kind, doc, ()))
        return out

    def check(self, name: str, settings: dict[str, str | None]) -> None:
        """Kafka's ClientMetricsConfigs.validate, its errors and messages."""
        if not name:
            raise ConfigError("Subscription name can't be empty", E.invalid_request)
        for key in settings:
            if key not in DEFINITIONS:
                raise ConfigError(f"Unknown client metrics configuration: {key}", E.invalid_request)
        interval = settings.get(INTERVAL)
        if interval is not None:
            try:
                ms = int(interval.strip())
            except ValueError:
                raise ConfigError(
                    f"Invalid value {interval} for configuration {INTERVAL}: Not a number of type INT"
                ) from None
            if not MIN_INTERVAL_MS <= ms <= MAX_INTERVAL_MS:
                raise ConfigError(
                    f"Invalid value {interval} for {INTERVAL}, interval must be between {MIN_INTERVAL_MS} and"
                    f" {MAX_INTERVAL_MS} (1 hour)",
                    E.invalid_request,
                )
        for entry in [e.strip() for e in (settings.get(MATCH) or "").split(",") if e.strip()]:
            key, eq, pattern = entry.partition("=")
            ok = bool(eq) and key.strip() in MATCH_KEYS and bool(pattern.strip())
            if ok:
                try:
                    re.compile(pattern.strip())
                except re.error:
                    ok = False
            if not ok:
                raise ConfigError(f"Illegal client matching pattern: {entry}")
