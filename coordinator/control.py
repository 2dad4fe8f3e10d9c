"""The test control as JSON over HTTP, for tests written in any language: injected faults
(`/faults`), request tracking (`/requests`), narrowed API version ranges (`/api-versions`)
and, in a server with several brokers, the cluster's topology (`/cluster`).

Served on the metrics port, and only with `--enable-test-control`: a broker in production
must never take orders to fail. Every request is handled on the server's event loop, between
Kafka requests. A bad request (unreadable JSON, an unknown field, a bad value) is answered
400 with one message, {"error": "..."}, and changes nothing.

    GET    /faults                          the active rules
    POST   /faults                          add a rule (a JSON object), or several (a list: all or none)
    DELETE /faults                          clear every rule (stalled requests go on)
    DELETE /faults/{id}                     clear one
    GET    /requests?api=..&client_id=..&broker=..&group=..&topic=..&transactional_id=..
                                            the tracked requests (filters optional), and the status
    DELETE /requests                        forget the tracked requests
    GET    /requests/tracking               whether requests are tracked, the limit, how many held and dropped
    POST   /requests/tracking               start tracking ({"limit": n}: optional)
    DELETE /requests/tracking               stop tracking (what was tracked stays readable)
    GET    /api-versions                    every served API's advertised and served ranges
    POST   /api-versions                    narrow ranges: {"api": "Fetch", "min_version": 4, "max_version": 11},
                                            or a list (all or none)
    DELETE /api-versions                    the full ranges again
    DELETE /api-versions/{api}              the full range of one API again
    GET    /cluster                         the brokers
    GET    /cluster/coordinators/{group_id}  the node id of the group's coordinator
    GET    /cluster/leaders/{topic}/{partition}  the node id of the partition's leader
    GET    /cluster/transaction-coordinators/{transactional_id}
    POST   /cluster/brokers/{id}/stop       (and /start; {"preferred": true}: it leads again
                                            the partitions it is the preferred replica of)
    POST   /cluster/coordinators/move       {"group_id": "g", "to": 2}  (to: optional)
    POST   /cluster/transaction-coordinators/move  {"transactional_id": "t", "to": 2}
    POST   /cluster/leaders/move            {"topic": "t", "partition": 0, "to": 2}

The /cluster routes drive the server's `cluster_control` (coordinator/topology.py's
ClusterControl), present once loaded when the server runs several brokers; without it they
answer 404.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from typing import Any, Callable
from urllib.parse import parse_qs, unquote

from .api_version_limits import ApiVersionLimits
from .faults import Faults
from .tracking import RequestLog, filters_of_query

JSON = "application/json"
MAX_BODY_BYTES = 1 << 20
READ_TIMEOUT_S = 10

Answer = tuple[str, str, bytes]


def _json(status: str, value: Any) -> Answer:
    return status, JSON, (json.dumps(value, default=_plain) + "\n").encode()


def _plain(value: Any) -> Any:
    """What ClusterControl returns (dataclasses, named tuples, sets) as JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def bad_request(message: str) -> Answer:
    return _json("400 Bad Request", {"error": message})


def not_found(message: str) -> Answer:
    return _json("404 Not Found", {"error": message})


_BROKER_ACTION = re.compile(r"/cluster/brokers/(-?\d+)/(stop|start)")
_COORDINATOR = re.compile(r"/cluster/coordinators/([^/]+)")
_TXN_COORDINATOR = re.compile(r"/cluster/transaction-coordinators/([^/]+)")
_LEADER = re.compile(r"/cluster/leaders/([^/]+)/(\d+)")
_FAULT = re.compile(r"/faults/(\d+)")


@dataclasses.dataclass(frozen=True)
class TestControl:
    """Routes of the control API onto the server's Faults, RequestLog, ApiVersionLimits and
    ClusterControl (`cluster_control()`: None with one broker, or before the server loaded)."""

    __test__ = False  # (not a pytest test class, whatever its name)

    faults: Faults
    tracking: RequestLog
    api_version_limits: ApiVersionLimits
    cluster_control: Callable[[], Any]

    def handles(self, path: str) -> bool:
        return path in ("/faults", "/requests", "/api-versions") or path.startswith(
            ("/faults/", "/requests/", "/api-versions/", "/cluster")
        )

    async def answer(self, method: str, path: str, body: bytes, query: str = "") -> Answer:
        try:
            if path == "/requests" or path.startswith("/requests/"):
                return self._requests(method, path, body, query)
            if path == "/api-versions" or path.startswith("/api-versions/"):
                return self._api_versions(method, path, body)
            return await self._route(method, path, body)
        except ValueError as e:  # a bad value, said by Faults or ClusterControl
            return bad_request(str(e))
        except KeyError as e:  # something named that does not exist (a broker, a topic)
            return not_found(str(e.args[0]) if e.args else "not found")

    async def _route(self, method: str, path: str, body: bytes) -> Answer:
        faults = self.faults
        if path == "/faults":
            return _specs(method, body, faults.list, (faults.add_specs, "201 Created"), (faults.clear, "cleared"))
        m = _FAULT.fullmatch(path)
        if m:
            if method != "DELETE":
                return _method_not_allowed("DELETE")
            if not faults.clear(int(m.group(1))):
                return not_found(f"no fault {m.group(1)}")
            return _json("200 OK", {"cleared": 1})
        if path.startswith("/cluster"):
            return await self._cluster(method, path, body)
        return not_found(f"no route {path}")

    def _requests(self, method: str, path: str, body: bytes, query: str) -> Answer:
        tracking = self.tracking
        if path == "/requests":

            def found() -> Answer:
                try:
                    parsed = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
                except ValueError:
                    raise ValueError(f"bad query {query!r}") from None
                return _json("200 OK", {**tracking.status(), "requests": tracking.requests(**filters_of_query(parsed))})

            return _by_method(method, GET=found, DELETE=lambda: _json("200 OK", {"cleared": tracking.clear()}))
        if path == "/requests/tracking":
            return _by_method(
                method,
                GET=lambda: _json("200 OK", tracking.status()),
                POST=lambda: _json(
                    "200 OK", tracking.start(_fields(_parse(body, empty_ok=True), {"limit"}).get("limit"))
                ),
                DELETE=lambda: _json("200 OK", tracking.stop()),
            )
        return not_found(f"no route {path}")

    def _api_versions(self, method: str, path: str, body: bytes) -> Answer:
        limits = self.api_version_limits
        if path == "/api-versions":
            return _specs(method, body, limits.ranges, (limits.set_specs, "200 OK"), (limits.reset, "reset"))
        if method != "DELETE":
            return _method_not_allowed("DELETE")
        api = unquote(path.removeprefix("/api-versions/"))
        return _json("200 OK", {"reset": limits.reset(int(api) if api.isdigit() else api)})

    async def _cluster(self, method: str, path: str, body: bytes) -> Answer:
        cluster = self.cluster_control()
        if cluster is None:
            return not_found("this server runs no cluster control (a single broker)")
        if method == "GET":
            return self._cluster_lookup(cluster, path)
        if method != "POST":
            return _method_not_allowed("POST")
        m = _BROKER_ACTION.fullmatch(path)
        if m:
            node_id, action = int(m.group(1)), m.group(2)
            spec = _fields(_parse(body, empty_ok=True), {"preferred"} if action == "start" else set())
            preferred = spec.get("preferred", False)
            if type(preferred) is not bool:
                raise ValueError(f"preferred must be true or false, not {preferred!r}")
            await (
                cluster.stop_broker(node_id) if action == "stop" else cluster.start_broker(node_id, preferred=preferred)
            )
            return _json("200 OK", {"broker": node_id, "action": action})
        if path == "/cluster/coordinators/move":
            spec = _fields(_parse(body), {"group_id", "to"}, "group_id")
            moved = await cluster.move_coordinator(_str(spec, "group_id"), to=_node(spec))
            return _json("200 OK", {"group_id": spec["group_id"], "coordinator": moved})
        if path == "/cluster/transaction-coordinators/move":
            spec = _fields(_parse(body), {"transactional_id", "to"}, "transactional_id")
            moved = await cluster.move_transaction_coordinator(_str(spec, "transactional_id"), to=_node(spec))
            return _json("200 OK", {"transactional_id": spec["transactional_id"], "coordinator": moved})
        if path == "/cluster/leaders/move":
            spec = _fields(_parse(body), {"topic", "partition", "to"}, "topic", "partition")
            partition = spec["partition"]
            if type(partition) is not int:
                raise ValueError(f"partition must be an integer, not {partition!r}")
            moved = await cluster.move_leader(_str(spec, "topic"), partition, to=_node(spec))
            return _json("200 OK", {"topic": spec["topic"], "partition": partition, "leader": moved})
        return not_found(f"no route {path}")

    @staticmethod
    def _cluster_lookup(cluster: Any, path: str) -> Answer:
        if path == "/cluster":
            return _json("200 OK", {"brokers": cluster.brokers()})
        m = _COORDINATOR.fullmatch(path)
        if m:
            group_id = unquote(m.group(1))
            return _json("200 OK", {"group_id": group_id, "coordinator": cluster.coordinator_of(group_id)})
        m = _TXN_COORDINATOR.fullmatch(path)
        if m:
            txn_id = unquote(m.group(1))
            return _json(
                "200 OK", {"transactional_id": txn_id, "coordinator": cluster.transaction_coordinator_of(txn_id)}
            )
        m = _LEADER.fullmatch(path)
        if m:
            topic, partition = unquote(m.group(1)), int(m.group(2))
            return _json(
                "200 OK", {"topic": topic, "partition": partition, "leader": cluster.leader_of(topic, partition)}
            )
        return not_found(f"no route GET {path}")

    async def answer_http(self, head: bytes, reader: asyncio.StreamReader) -> Answer:
        """Read the body the head announces (Content-Length), then answer."""
        request_line, _, headers = head.partition(b"\r\n")
        parts = request_line.split()
        if len(parts) != 3:
            return bad_request("bad request line")
        length = 0
        for line in headers.split(b"\r\n"):
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"transfer-encoding":
                return _json("411 Length Required", {"error": "send the body with a Content-Length"})
            if name == b"content-length":
                value = value.strip()
                if not value.isdigit():  # (int() would take "-1", "+5" and "1_0")
                    return bad_request("Content-Length is not a number")
                length = int(value)
        if length > MAX_BODY_BYTES:
            return _json("413 Content Too Large", {"error": f"a body of at most {MAX_BODY_BYTES} bytes"})
        body = await asyncio.wait_for(reader.readexactly(length), READ_TIMEOUT_S) if length else b""
        query = parts[1].partition(b"?")[2].decode("latin-1")
        return await self.answer(parts[0].decode("latin-1"), request_path(head), body, query)


def request_path(head: bytes) -> str:
    """The path of an HTTP request's head, without its query ("" if there is none)."""
    parts = head.split(b"\r\n", 1)[0].split()
    return parts[1].split(b"?", 1)[0].decode("latin-1") if len(parts) == 3 else ""


def _method_not_allowed(allowed: str) -> Answer:
    return _json("405 Method Not Allowed", {"error": f"allowed: {allowed}"})


def _by_method(method: str, **answers: Callable[[], Answer]) -> Answer:
    """A resource's answer to `method` (answers by HTTP method), else 405 naming those it allows."""
    answer = answers.get(method)
    return answer() if answer is not None else _method_not_allowed(", ".join(answers))


def _specs(
    method: str,
    body: bytes,
    listed: Callable[[], Any],
    add: tuple[Callable[[Any], list[Any]], str],
    clear: tuple[Callable[[], int], str],
) -> Answer:
    """A resource of specs (/faults, /api-versions): GET lists them, POST adds one or a list of
    them (`add`: what adds them, the status it answers), DELETE removes them all (`clear`: what
    removes them, the key its count is answered under)."""
    (adds, added), (clears, cleared) = add, clear
    return _by_method(
        method,
        GET=lambda: _json("200 OK", listed()),
        POST=lambda: _json(added, _one_or_many(_parse(body), adds)),
        DELETE=lambda: _json("200 OK", {cleared: clears()}),
    )


def _one_or_many(spec: Any, apply: Callable[[Any], list[Any]]) -> Any:
    """What apply(spec) made: one result for one spec (an object), a list for a list of them."""
    made = apply(spec)
    return made[0] if isinstance(spec, dict) else made


def _parse(body: bytes, empty_ok: bool = False) -> Any:
    if not body.strip():
        if empty_ok:
            return {}
        raise ValueError("the request needs a JSON body")
    try:
        return json.loads(body)
    except ValueError as e:  # (UnicodeDecodeError too)
        raise ValueError(f"the body is not JSON: {e}") from None


def _fields(spec: Any, allowed: set[str], *required: str) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise ValueError("the body must be a JSON object")
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise ValueError(
            f"unknown field {unknown[0]!r}"
            + (f"; fields: {', '.join(sorted(allowed))}" if allowed else "; this action takes none")
        )
    for name in required:
        if name not in spec:
            raise ValueError(f"field {name!r} is required")
    return spec


def _str(spec: dict[str, Any], name: str) -> str:
    value = spec[name]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string, not {value!r}")
    return value


def _node(spec: dict[str, Any]) -> int | None:
    to = spec.get("to")
    if to is not None and type(to) is not int:
        raise ValueError(f"to must be a broker's node id (an integer), not {to!r}")
    return to
