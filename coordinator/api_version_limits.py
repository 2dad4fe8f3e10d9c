"""Narrowed API version ranges, for tests: per API, the versions the brokers advertise in
ApiVersions and accept, within what they serve, so a test can check that its client falls
back to older versions.

What librdkafka's mock cluster gives its users with `rd_kafka_mock_set_apiversion`. A
request outside a narrowed range is answered as one of a version never served: ApiVersions
with UNSUPPORTED_VERSION in the v0 layout (KIP-511), any other API by closing the
connection, as Kafka's SocketServer does for a version its ApiVersionManager does not
enable. The ranges live in the server's Registry (coordinator/apis.py): a narrowed API is
routed like any other, so the request path costs nothing more.

    limits.set("OffsetCommit", max_version=7)
    limits.set("Produce", min_version=3, max_version=8)
    limits.ranges()    # every served API: its advertised and served ranges
    limits.reset()     # the full ranges again
"""

from __future__ import annotations

from typing import Any

from . import server_log
from .apis import Registry
from .faults import API_NAMES, api_key_of, check_spec, parse_specs

log = server_log.get(__name__)

FIELDS = ("api", "min_version", "max_version")


class ApiVersionLimits:
    """The narrowed ranges of one server's APIs (all its brokers: they share the registry)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def set(self, api: str | int, min_version: int | None = None, max_version: int | None = None) -> dict[str, Any]:
        """Advertise and accept only min_version..max_version of `api` (a bound left out: the
        served one). A range that is empty or not within the served one raises ValueError
        (one message), and nothing changes."""
        return self._apply([self._checked(api, min_version, max_version)])[0]

    def set_specs(self, specs: Any) -> list[dict[str, Any]]:
        """Ranges from JSON objects (the HTTP control), with the fields of set(): all of them,
        or, if any is bad, none (ValueError naming the first bad one)."""
        return self._apply(parse_specs(specs, "version range", self._of_spec))

    def reset(self, api: str | int | None = None) -> int:
        """The full served range again for `api`, or for every API; how many were narrowed."""
        keys = list(self.registry.served) if api is None else [self._served_key(api)]
        narrowed = [k for k in keys if self.registry.apis[k] != self.registry.served[k]]
        for key in narrowed:
            served = self.registry.served[key]
            self.registry.narrow(key, served.min_version, served.max_version)
        if narrowed:
            log.info("api versions reset: %s", ", ".join(API_NAMES.get(k, str(k)) for k in narrowed))
        return len(narrowed)

    def ranges(self, narrowed_only: bool = False) -> list[dict[str, Any]]:
        """Every served API (or only the narrowed ones), by key."""
        out = [self._entry(key) for key in sorted(self.registry.served)]
        return [e for e in out if e["narrowed"]] if narrowed_only else out

    # ---------------------------------------------------------------------------------------

    def _apply(self, ranges: list[tuple[int, int, int]]) -> list[dict[str, Any]]:
        for key, low, high in ranges:
            self.registry.narrow(key, low, high)
            log.info("api versions of %s: %d..%d", API_NAMES.get(key, str(key)), low, high)
        return [self._entry(key) for key, _, _ in ranges]

    def _entry(self, key: int) -> dict[str, Any]:
        api, served = self.registry.apis[key], self.registry.served[key]
        return {
            "api": API_NAMES.get(key, str(key)),
            "api_key": key,
            "min_version": api.min_version,
            "max_version": api.max_version,
            "served_min_version": served.min_version,
            "served_max_version": served.max_version,
            "narrowed": api != served,
        }

    def _of_spec(self, spec: Any) -> tuple[int, int, int]:
        spec = check_spec(spec, "version range", FIELDS)
        return self._checked(spec["api"], spec.get("min_version"), spec.get("max_version"))

    def _served_key(self, api: Any) -> int:
        key = api_key_of(api)
        if key not in self.registry.served:
            raise ValueError(f"api: this server does not serve {API_NAMES.get(key, key)} (key {key})")
        return key

    def _checked(self, api: Any, min_version: Any, max_version: Any) -> tuple[int, int, int]:
        key = self._served_key(api)
        served = self.registry.served[key]
        for name, value in (("min_version", min_version), ("max_version", max_version)):
            if value is not None and type(value) is not int:
                raise ValueError(f"{name} must be an integer, not {value!r}")
        low = served.min_version if min_version is None else min_version
        high = served.max_version if max_version is None else max_version
        name = API_NAMES.get(key, str(key))
        if low > high:
            raise ValueError(f"{name}: versions {low}..{high} is an empty range")
        if low < served.min_version or high > served.max_version:
            raise ValueError(
                f"{name}: versions {low}..{high} are not within {served.min_version}..{served.max_version}, "
                "the versions this server serves"
            )
        return key, low, high
